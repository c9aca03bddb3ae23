// The orphan guard: an agent killed by SIGKILL takes its workers and their children with it.

#include <catch2/catch.hpp>

#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "agent/process/orphan_guard.hpp"
#include "agent/process/worker_group.hpp"
#include "agent_test_util.hpp"

namespace ddp::agent {
namespace {

using namespace std::chrono_literals;

// Reads "<worker pid> <grandchild pid>" from the FIFO the worker writes once both run.
std::pair<pid_t, pid_t> read_pids(int fifo_fd) {
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (text.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    pollfd p{fifo_fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[64];
    const ssize_t n = ::read(fifo_fd, buf, sizeof buf);
    if (n > 0) text.append(buf, static_cast<size_t>(n));
  }
  std::istringstream in(text);
  pid_t worker = 0, grandchild = 0;
  in >> worker >> grandchild;
  return {worker, grandchild};
}

bool all_dead_within(const std::vector<pid_t>& pids, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (true) {
    bool dead = true;
    for (pid_t pid : pids) dead = dead && test::is_dead(pid);
    if (dead) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
}

// The program the watchdog of this process runs: ddprun-guard, or a forked copy of this test.
std::string watchdog_program() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink(
      "/proc/" + std::to_string(OrphanGuard::instance().watchdog_pid()) + "/exe", ec);
  return ec ? "unknown" : exe.filename().string();
}

TEST_CASE("SIGKILL to the agent kills its workers and their grandchildren within 1 s",
          "[orphan_guard]") {
  // Both ways of starting the watchdog: the static helper beside the executable (the default),
  // and a fork of the agent (no helper there, or DDPRUN_GUARD=fork).
  const bool fork_fallback = GENERATE(false, true);
  INFO((fork_fallback ? "DDPRUN_GUARD=fork" : "ddprun-guard helper"));
  test::TempDir dir;
  const std::string program_file = dir.file("watchdog_program");
  const std::string fifo = dir.file("pids");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const int fifo_fd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  REQUIRE(fifo_fd >= 0);

  const pid_t agent = ::fork();
  REQUIRE(agent >= 0);
  if (agent == 0) {  // the "agent": a WorkerGroup with one worker that starts a grandchild
    try {
      if (fork_fallback) ::setenv("DDPRUN_GUARD", "fork", 1);
      become_child_subreaper();
      std::ofstream(program_file) << watchdog_program();
      boost::asio::io_context io;
      WorkerGroup group(io, OutputOptions{});
      group.start({test::sh_worker("sleep 30 >/dev/null 2>&1 & echo $$ $! > " + fifo + "; wait")});
      io.run_for(30s);
    } catch (...) {
    }
    ::_exit(1);
  }
  const auto [worker, grandchild] = read_pids(fifo_fd);
  ::close(fifo_fd);
  REQUIRE(worker > 0);
  REQUIRE(grandchild > 0);
  CHECK_FALSE(test::is_dead(worker));
  CHECK_FALSE(test::is_dead(grandchild));
  CHECK(test::read_file(program_file) == (fork_fallback ? "agent_process_tests" : "ddprun-guard"));

  ::kill(agent, SIGKILL);
  int status = 0;
  REQUIRE(::waitpid(agent, &status, 0) == agent);
  const bool dead = all_dead_within({worker, grandchild}, 1s);
  INFO("worker " << worker << ": " << test::read_file("/proc/" + std::to_string(worker) + "/stat"));
  INFO("grandchild " << grandchild << ": "
                     << test::read_file("/proc/" + std::to_string(grandchild) + "/stat"));
  if (!dead) {  // do not leave them behind for the next test
    ::kill(-worker, SIGKILL);
    ::kill(grandchild, SIGKILL);
  }
  CHECK(dead);
}

TEST_CASE("the guard's watchdog runs apart from the agent's process group", "[orphan_guard]") {
  OrphanGuard& guard = OrphanGuard::instance();
  REQUIRE(guard.is_active());
  CHECK_FALSE(test::is_dead(guard.watchdog_pid()));
  CHECK(::getpgid(guard.watchdog_pid()) == guard.watchdog_pid());
  CHECK(watchdog_program() == "ddprun-guard");
  CHECK(&OrphanGuard::instance() == &guard);
}

}  // namespace
}  // namespace ddp::agent
