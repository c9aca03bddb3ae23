// WorkerGroup with real /bin/sh workers: exits, failures, stop with grace then SIGKILL, signals,
// missing programs, grandchildren and the stderr tail.

#include <catch2/catch.hpp>

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <sys/wait.h>

#include <csignal>
#include <variant>

#include "agent/process/worker_group.hpp"
#include "agent_test_util.hpp"
#include "ddp/error.hpp"

namespace ddp::agent {
namespace {

using namespace std::chrono_literals;
using test::run_until;
using test::run_until_done;
using test::sh_worker;

const WorkerExit* exit_of(const WorkerGroup& group, int local_rank) {
  for (const auto& e : group.exits()) {
    if (e.local_rank == local_rank) return &e;
  }
  return nullptr;
}

using Fixture = test::ConsoleFixture;

TEST_CASE("worker exit codes and signals are reported", "[worker_group]") {
  Fixture f;
  WorkerGroup group(f.io, f.options());
  group.start({sh_worker("exit 0", 0), sh_worker("exit 3", 1), sh_worker("kill -9 $$", 2)});
  REQUIRE(group.pids().size() == 3);
  REQUIRE(run_until(f.io, [&] { return !group.running(); }));
  REQUIRE(group.exits().size() == 3);
  CHECK_FALSE(exit_of(group, 0)->failed());
  CHECK(exit_of(group, 1)->exit_code == 3);
  CHECK(exit_of(group, 1)->signal == 0);
  CHECK(exit_of(group, 2)->signal == SIGKILL);
  CHECK_FALSE(exit_of(group, 2)->stopped_by_agent);
  CHECK(exit_of(group, 1)->pid == group.pids()[1]);
}

TEST_CASE("wait_first_failure returns nullopt when every worker succeeds", "[worker_group]") {
  Fixture f;
  WorkerGroup group(f.io, f.options());
  group.start({sh_worker("true", 0), sh_worker("exit 0", 1)});
  CHECK_FALSE(run_until_done(f.io, group.wait_first_failure()).has_value());
  CHECK(group.exits().size() == 2);
}

TEST_CASE("wait_first_failure returns the failure while others still run, stop ends them",
          "[worker_group]") {
  Fixture f;
  WorkerGroup group(f.io, f.options());
  auto spec = sh_worker("exec sleep 30", 0);
  spec.error_file = f.dir.file("error.json");
  group.start({spec, sh_worker("exit 7", 1)});
  const auto failure = run_until_done(f.io, group.wait_first_failure());
  REQUIRE(failure.has_value());
  CHECK(failure->local_rank == 1);
  CHECK(failure->exit_code == 7);
  CHECK(group.running());

  const auto exits = run_until_done(f.io, group.stop(SIGTERM, 5s));
  REQUIRE(exits.size() == 2);
  CHECK(exits[0].local_rank == 1);  // in order of time
  CHECK(exits[1].signal == SIGTERM);
  CHECK(exits[1].stopped_by_agent);
  CHECK(exits[1].error_file == spec.error_file);
  CHECK_FALSE(group.running());
  SECTION("stop is idempotent") {
    CHECK(run_until_done(f.io, group.stop(SIGTERM, 5s)).size() == 2);
  }
}

TEST_CASE("replace starts a failed local rank again while its sibling runs on",
          "[worker_group]") {
  Fixture f;
  WorkerGroup group(f.io, f.options());
  group.start({sh_worker("exec sleep 30", 0), sh_worker("exit 3", 1)});
  const pid_t sibling = group.pids()[0];
  const pid_t failed = group.pids()[1];
  const auto failure = run_until_done(f.io, group.wait_first_failure());
  REQUIRE(failure.has_value());
  CHECK(failure->pid == failed);

  const pid_t fresh = group.replace(sh_worker("exit 0", 1));
  CHECK(fresh != failed);
  CHECK(group.pids() == std::vector<pid_t>{sibling, fresh});  // by local rank still
  REQUIRE(group.exits().size() == 1);
  CHECK(group.exits()[0].replaced);
  CHECK_THROWS_AS(group.replace(sh_worker("true", 0)), InternalError);  // rank 0 still runs

  // The replaced failure is not returned again: the wait sees the new process exit 0 and goes
  // on until the sibling ends, stopped here by the agent.
  REQUIRE(run_until(f.io, [&] { return group.exits().size() == 2; }));
  CHECK(group.exits()[1].pid == fresh);
  CHECK_FALSE(group.exits()[1].failed());
  CHECK(group.running());
  const auto exits = run_until_done(f.io, group.stop(SIGTERM, 5s));
  REQUIRE(exits.size() == 3);
  CHECK(exits[2].pid == sibling);
  CHECK(exits[2].stopped_by_agent);
}

TEST_CASE("wait_first_failure skips a replaced failure", "[worker_group]") {
  Fixture f;
  WorkerGroup group(f.io, f.options());
  group.start({sh_worker("exit 0", 0), sh_worker("exit 4", 1)});
  REQUIRE(run_until_done(f.io, group.wait_first_failure()).has_value());
  group.replace(sh_worker("exit 0", 1));
  CHECK_FALSE(run_until_done(f.io, group.wait_first_failure()).has_value());
  CHECK(group.exits().size() == 3);
}

TEST_CASE("stop sends SIGKILL once the grace period is over", "[worker_group]") {
  Fixture f;
  WorkerGroup group(f.io, f.options());
  group.start({sh_worker("trap '' TERM; echo ready; while :; do sleep 0.05; done", 0)});
  REQUIRE(run_until(f.io, [&] { return f.out.text() == "ready\n"; }));
  const auto exits = run_until_done(f.io, group.stop(SIGTERM, 100ms));
  REQUIRE(exits.size() == 1);
  CHECK(exits[0].signal == SIGKILL);
  CHECK(exits[0].stopped_by_agent);
}

// stop_worker() with a value, as run_until_done() needs.
boost::asio::awaitable<bool> stop_worker_done(WorkerGroup& group, int local_rank, int signal,
                                              std::chrono::milliseconds grace) {
  co_await group.stop_worker(local_rank, signal, grace);
  co_return true;
}

TEST_CASE("stop_worker ends one stopped worker alone, and SIGKILLs one that ignores the signal",
          "[worker_group]") {
  Fixture f;
  WorkerGroup group(f.io, f.options());
  group.start({sh_worker("exec sleep 30", 0), sh_worker("exec sleep 30", 1),
               sh_worker("trap '' TERM; echo ready; while :; do sleep 0.05; done", 2)});
  const std::vector<pid_t> pids = group.pids();
  REQUIRE(run_until(f.io, [&] { return f.out.text() == "ready\n"; }));
  REQUIRE(::kill(pids[1], SIGSTOP) == 0);  // a hung worker: it takes SIGTERM only once continued

  run_until_done(f.io, stop_worker_done(group, 1, SIGTERM, 5s));
  REQUIRE(group.exits().size() == 1);
  CHECK(group.exits()[0].pid == pids[1]);
  CHECK(group.exits()[0].signal == SIGTERM);
  CHECK(group.exits()[0].stopped_by_agent);
  CHECK(group.running());  // its siblings run on

  run_until_done(f.io, stop_worker_done(group, 2, SIGTERM, 100ms));
  REQUIRE(group.exits().size() == 2);
  CHECK(group.exits()[1].pid == pids[2]);
  CHECK(group.exits()[1].signal == SIGKILL);
  run_until_done(f.io, stop_worker_done(group, 2, SIGTERM, 100ms));  // exited already: nothing to do
  CHECK(group.exits().size() == 2);

  // The stopped one can be started again; the untouched one still runs.
  const pid_t fresh = group.replace(sh_worker("exit 0", 1));
  CHECK(group.pids() == std::vector<pid_t>{pids[0], fresh, pids[2]});
  run_until_done(f.io, group.stop(SIGTERM, 5s));
  REQUIRE(exit_of(group, 0) != nullptr);
  CHECK(exit_of(group, 0)->pid == pids[0]);
  CHECK(exit_of(group, 0)->signal == SIGTERM);
}

TEST_CASE("signal_all reaches every worker's process group", "[worker_group]") {
  Fixture f;
  WorkerGroup group(f.io, f.options());
  const std::string script =
      "trap 'echo got TERM; exit 5' TERM; echo ready; while :; do sleep 0.05; done";
  group.start({sh_worker(script, 0), sh_worker(script, 1)});
  REQUIRE(run_until(f.io, [&] { return f.out.text() == "ready\nready\n"; }));
  group.signal_all(SIGTERM);
  REQUIRE(run_until(f.io, [&] { return !group.running(); }));
  for (const auto& e : group.exits()) {
    CHECK(e.exit_code == 5);
    CHECK(e.stopped_by_agent);
  }
  CHECK(f.out.text() == "ready\nready\ngot TERM\ngot TERM\n");
}

TEST_CASE("a missing program is an IoError naming it, and nothing is left running",
          "[worker_group]") {
  Fixture f;
  WorkerGroup group(f.io, f.options());
  auto missing = sh_worker("", 1);
  missing.argv = {"ddp-no-such-program-xyz"};
  CHECK_THAT(test::thrown_message<IoError>(
                 [&] { group.start({sh_worker("exec sleep 30", 0), missing}); }),
             Catch::Matchers::Contains("ddp-no-such-program-xyz"));
  CHECK_FALSE(group.running());
  CHECK(group.pids().empty());

  SECTION("a program that cannot be executed is reported by exec, not as exit 127") {
    WorkerGroup other(f.io, f.options());
    auto not_executable = sh_worker("", 1);
    not_executable.argv = {f.dir.file("console.out")};  // exists, not executable
    ::chmod(not_executable.argv[0].c_str(), 0755);
    auto first = sh_worker("exec sleep 30", 0);
    CHECK_THAT(test::thrown_message<IoError>([&] { other.start({first, not_executable}); }),
               Catch::Matchers::Contains("exec " + not_executable.argv[0]));
    CHECK_FALSE(other.running());
    for (pid_t pid : other.pids()) CHECK(test::is_dead(pid));
  }
}

TEST_CASE("stop kills grandchildren left in a worker's process group", "[worker_group]") {
  Fixture f;
  WorkerGroup group(f.io, f.options());
  // The grandchild keeps the worker's stdout: redirect it so the pipe can reach EOF.
  group.start({sh_worker("sleep 30 >/dev/null 2>&1 & echo $!; exit 0", 0)});
  REQUIRE(run_until(f.io, [&] { return !group.running(); }));
  const auto lines = test::lines_of(f.out.text());
  REQUIRE(lines.size() == 1);
  const pid_t grandchild = std::stoi(lines[0]);
  CHECK_FALSE(test::is_dead(grandchild));
  run_until_done(f.io, group.stop(SIGTERM, 5s));
  CHECK(run_until(f.io, [&] { return test::is_dead(grandchild); }, 2s));
}

TEST_CASE("the destructor kills workers that still run", "[worker_group]") {
  Fixture f;
  std::vector<pid_t> pids;
  {
    WorkerGroup group(f.io, f.options());
    group.start({sh_worker("exec sleep 30", 0), sh_worker("exec sleep 30", 1)});
    pids = group.pids();
  }
  for (pid_t pid : pids) CHECK(test::is_dead(pid));
}

TEST_CASE("exits carry the last 20 lines of stderr, partial last line included",
          "[worker_group]") {
  Fixture f;
  WorkerGroup group(f.io, f.options());
  group.start({sh_worker(
      "i=1; while [ $i -le 30 ]; do echo \"err $i\" >&2; i=$((i+1)); done; "
      "echo out; printf 'Error: boom' >&2; exit 1",
      0)});
  const auto failure = run_until_done(f.io, group.wait_first_failure());
  REQUIRE(failure.has_value());
  REQUIRE(failure->stderr_tail.size() == 20);
  CHECK(failure->stderr_tail.front() == "err 12");
  CHECK(failure->stderr_tail[18] == "err 30");
  CHECK(failure->stderr_tail.back() == "Error: boom");
  CHECK(f.out.text() == "out\n");
  CHECK(test::lines_of(f.err.text()).size() == 31);
}

TEST_CASE("workers get exactly the spec's argv and environment", "[worker_group]") {
  Fixture f;
  WorkerGroup group(f.io, f.options());
  auto spec = sh_worker("", 0);
  spec.argv = {"sh", "-c", "echo \"$RANK|$1|$2\"", "zero", "a b", "$c"};
  spec.env.push_back("RANK=7");
  group.start({spec});
  REQUIRE(run_until(f.io, [&] { return !group.running(); }));
  CHECK(f.out.text() == "7|a b|$c\n");
}

TEST_CASE("wait_first_failure can be cancelled by a racing operation and waited on again",
          "[worker_group]") {
  using namespace boost::asio::experimental::awaitable_operators;
  Fixture f;
  WorkerGroup group(f.io, f.options());
  group.start({sh_worker("exec sleep 30", 0)});
  boost::asio::steady_timer timer(f.io, 20ms);
  using Raced = std::variant<std::optional<WorkerExit>, std::monostate>;
  auto race = [&]() -> boost::asio::awaitable<Raced> {
    co_return co_await (group.wait_first_failure() ||
                        timer.async_wait(boost::asio::use_awaitable));
  };
  const Raced raced = run_until_done(f.io, race());
  CHECK(raced.index() == 1);  // the timer won; the group's wait was cancelled quietly
  CHECK(group.running());
  run_until_done(f.io, group.stop(SIGKILL, 1s));
  const auto failure = run_until_done(f.io, group.wait_first_failure());
  REQUIRE(failure.has_value());
  CHECK(failure->signal == SIGKILL);
}

TEST_CASE("a subreaper reaps orphans its workers leave behind", "[worker_group]") {
  const int code = test::exit_code_as_subreaper([] {
    boost::asio::io_context io;
    test::TempDir dir;
    test::ConsoleCapture out(dir.file("out"));
    OutputOptions options;
    options.stdout_fd = out.fd();
    WorkerGroup group(io, options);
    group.start({sh_worker("sleep 0.1 >/dev/null & echo $!", 0)});
    run_until(io, [&] { return !group.running(); });
    const pid_t orphan = std::stoi(out.text());
    // Reaped (gone from /proc), not merely dead: it was reparented to us.
    const bool reaped = run_until(
        io, [&] { return !std::filesystem::exists("/proc/" + std::to_string(orphan)); }, 5s);
    return reaped ? 0 : 2;
  });
  CHECK(code == 0);
}

TEST_CASE("an empty group has nothing to wait for", "[worker_group]") {
  Fixture f;
  WorkerGroup group(f.io, f.options());
  group.start({});
  CHECK_FALSE(run_until_done(f.io, group.wait_first_failure()).has_value());
  CHECK(run_until_done(f.io, group.stop(SIGTERM, 1s)).empty());
}

}  // namespace
}  // namespace ddp::agent
