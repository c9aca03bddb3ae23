#pragma once
// Helpers for the WorkerGroup tests: temp dirs, /bin/sh worker specs, a captured console, running
// the loop until an awaitable completes, and checking whether a pid is gone.

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <fcntl.h>
#include <sys/wait.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "agent/cli/worker_specs.hpp"
#include "agent/core/worker_launcher.hpp"
#include "agent/process/worker_group.hpp"
#include "tests/unit/common/temp_dir.hpp"

extern char** environ;

namespace ddp::agent::test {

using ddp::test::TempDir;

inline std::vector<std::string> current_env() {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  return env;
}

// A worker running `/bin/sh -c script`.
inline WorkerSpec sh_worker(const std::string& script, int local_rank = 0) {
  WorkerSpec spec;
  spec.local_rank = local_rank;
  spec.rank = local_rank;
  spec.role_rank = local_rank;
  spec.argv = {"/bin/sh", "-c", script};
  spec.env = current_env();
  return spec;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

// A file the group writes its console lines to (a file, not a pipe: nobody reads while the loop
// runs, and a full pipe would block the agent).
class ConsoleCapture {
 public:
  explicit ConsoleCapture(const std::string& path)
      : path_(path), fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) {}
  ~ConsoleCapture() { ::close(fd_); }
  ConsoleCapture(const ConsoleCapture&) = delete;
  ConsoleCapture& operator=(const ConsoleCapture&) = delete;
  int fd() const { return fd_; }
  std::string text() const { return read_file(path_); }

 private:
  std::string path_;
  int fd_;
};

// What the WorkerGroup tests start from: a temp dir, the console captured in two of its files,
// and the loop. options() sends console lines to the captures, with "node7" as the host.
struct ConsoleFixture {
  TempDir dir;
  ConsoleCapture out{dir.file("console.out")};
  ConsoleCapture err{dir.file("console.err")};
  boost::asio::io_context io;

  OutputOptions options() const {
    OutputOptions o;
    o.host = "node7";
    o.stdout_fd = out.fd();
    o.stderr_fd = err.fd();
    return o;
  }
};

// Runs the loop until `aw` completes (rethrowing what it threw) or `limit` passes (then throws).
template <typename T>
T run_until_done(boost::asio::io_context& io, boost::asio::awaitable<T> aw,
                 std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  std::optional<T> result;
  std::exception_ptr error;
  bool done = false;
  boost::asio::co_spawn(io, std::move(aw), [&](std::exception_ptr e, T value) {
    done = true;
    error = e;
    if (!e) result.emplace(std::move(value));
  });
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done && std::chrono::steady_clock::now() < deadline) {
    io.restart();
    io.run_one_for(std::chrono::milliseconds(50));
  }
  if (!done) throw std::runtime_error("test awaitable did not complete in time");
  if (error) std::rethrow_exception(error);
  return std::move(*result);
}

// Runs the loop until `pred()` holds or `limit` passes; returns pred().
template <typename Pred>
bool run_until(boost::asio::io_context& io, Pred pred,
               std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pred() && std::chrono::steady_clock::now() < deadline) {
    io.restart();
    io.run_one_for(std::chrono::milliseconds(10));
  }
  return pred();
}

// The message of the `E` that `f` throws; "" when it throws nothing (another type propagates).
template <typename E, typename F>
std::string thrown_message(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

// Runs `body` in a forked child made a child subreaper (that changes the whole process, so the
// test process stays as it was); returns body's result as the child's exit code (1 if it threw).
inline int exit_code_as_subreaper(const std::function<int()>& body) {
  const pid_t agent = ::fork();
  if (agent < 0) return -1;
  if (agent == 0) {
    int code = 1;
    try {
      become_child_subreaper();
      code = body();
    } catch (...) {
    }
    ::_exit(code);
  }
  int status = 0;
  if (::waitpid(agent, &status, 0) != agent || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// True when `pid` no longer runs: gone, or a zombie nobody reaped yet.
inline bool is_dead(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return true;
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos || paren + 2 >= text.size()) return true;
  const char state = text[paren + 2];
  return state == 'Z' || state == 'X';
}

}  // namespace ddp::agent::test
