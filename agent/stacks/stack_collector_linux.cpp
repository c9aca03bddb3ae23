// Stack collection. Every target is started at once (signals sent, backtrace tools spawned), then
// a 50 ms timer checks them until all are done or the deadline passes. faulthandler gives no
// completion notice, so a Python dump counts as done once its file grew and then stayed the same
// size for one tick; the tools are our own children, reaped here by pid (never waitpid(-1)).

#include "agent/stacks/stack_collector.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "agent/process/process_spawner.hpp"
#include "agent/stacks/stack_hook.hpp"
#include "common/unique_fd.hpp"

namespace ddp::agent {
namespace {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;
constexpr auto kTick = std::chrono::milliseconds(50);

std::optional<off_t> file_size(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return st.st_size;
}

std::string read_from(const std::string& path, off_t offset) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(offset);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// One target in flight.
struct Pending {
  RankStack stack;
  bool done = false;
  // python
  std::string python_file;
  off_t start_size = 0;
  off_t last_size = -1;
  // native
  pid_t tool_pid = -1;
  std::string tool_output;
};

// Spawns `eu-stack -p PID` (else gdb in batch mode) writing to `output`; returns its pid or -1
// with the reason in `why`.
pid_t spawn_backtrace(pid_t pid, const std::string& output, std::string& why) {
  const std::string target = std::to_string(pid);
  const std::vector<std::vector<std::string>> tools = {
      {"eu-stack", "-p", target},
      {"gdb", "-batch", "-nx", "-p", target, "-ex", "thread apply all bt"}};
  const std::vector<std::string> env = {"PATH=/usr/bin:/bin:/usr/local/bin", "LC_ALL=C"};
  const UniqueFd fd(::open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd) {
    why = fmt::format("cannot write {}", output);
    return -1;
  }
  why = "neither eu-stack (elfutils) nor gdb is installed";
  pid_t started = -1;
  for (const auto& argv : tools) {
    try {
      const ExecImage image(argv, env);
      ChildSetup setup;
      setup.stdout_fd = fd.get();
      setup.stderr_fd = fd.get();
      ForkedChild child(image, setup);
      if (child.await_exec() == 0) {
        started = child.pid();
        break;
      }
      reap_process(child.pid(), true);
    } catch (const std::exception&) {
      // not installed: try the next tool
    }
  }
  return started;
}

void start(Pending& p, const StackTarget& target, const std::string& dir) {
  const char state = process_state(target.pid);
  if (state == 0 || state == 'Z') {
    p.stack.kind = "none";
    p.stack.text = "(exited)";
    p.done = true;
    return;
  }
  p.python_file = python_stack_file(target.stack_dir, target.pid);
  const auto size = file_size(p.python_file);
  // A stopped process cannot run a signal handler: only a native backtrace reaches it.
  if (size && state != 'T' && state != 't') {
    p.stack.kind = "python";
    p.start_size = *size;
    if (::kill(target.pid, stack_signal()) != 0) {
      p.stack.kind = "none";
      p.stack.text = "(exited)";
      p.done = true;
    }
    return;
  }
  p.stack.kind = "native";
  p.tool_output = (std::filesystem::path(dir) / fmt::format("native-{}.txt", target.pid)).string();
  std::string why;
  p.tool_pid = spawn_backtrace(target.pid, p.tool_output, why);
  if (p.tool_pid < 0) {
    p.stack.kind = "none";
    p.stack.text = "(" + why + ")";
    p.done = true;
  }
}

void check(Pending& p) {
  if (p.done) return;
  if (p.tool_pid > 0) {
    if (!reap_process(p.tool_pid, false)) return;
    p.tool_pid = -1;
    p.stack.text = read_from(p.tool_output, 0);
    p.done = true;
    return;
  }
  const off_t size = file_size(p.python_file).value_or(0);
  if (size > p.start_size && size == p.last_size) {
    p.stack.text = read_from(p.python_file, p.start_size);
    p.done = true;
  }
  p.last_size = size;
}

void give_up(Pending& p, std::chrono::milliseconds timeout) {
  if (p.done) return;
  if (p.tool_pid > 0) {
    ::kill(p.tool_pid, SIGKILL);
    reap_process(p.tool_pid, true);
  }
  p.stack.text = fmt::format("(no stack within {:.1f}s; process state {})",
                             timeout.count() / 1000.0, process_state(p.stack.pid));
  p.stack.kind = "none";
}

}  // namespace

char process_state(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat;
  if (!std::getline(in, stat)) return 0;
  // "pid (comm) S ...": comm may hold spaces and parentheses, so look after the last ')'.
  const auto close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return 0;
  return stat[close + 2];
}

asio::awaitable<std::vector<RankStack>> collect_stacks(std::vector<StackTarget> targets,
                                                       std::string host,
                                                       std::chrono::milliseconds timeout) {
  std::vector<Pending> pending(targets.size());
  for (std::size_t i = 0; i < targets.size(); ++i) {
    auto& p = pending[i];
    p.stack.rank = targets[i].rank;
    p.stack.local_rank = targets[i].local_rank;
    p.stack.pid = targets[i].pid;
    p.stack.host = host;
    start(p, targets[i], targets[i].stack_dir);
  }
  asio::steady_timer timer(co_await asio::this_coro::executor);
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    bool all_done = true;
    for (auto& p : pending) {
      check(p);
      all_done = all_done && p.done;
    }
    if (all_done || Clock::now() >= deadline) break;
    timer.expires_after(kTick);
    const auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec) break;  // cancelled: report what has arrived
  }
  std::vector<RankStack> stacks;
  for (auto& p : pending) {
    give_up(p, timeout);
    stacks.push_back(std::move(p.stack));
  }
  co_return stacks;
}

}  // namespace ddp::agent
