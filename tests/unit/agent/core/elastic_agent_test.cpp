// ElasticAgent's state machine on one node with no processes: a FakeLauncher scripts the workers,
// a RecordingEventSink reads back what the agent did, and the static rendezvous is real (its own
// loopback store), all on one io_context. The c10d cases are in elastic_agent_c10d_test.cpp.

#include "agent/elastic/elastic_agent.hpp"

#include <catch2/catch.hpp>
#include <csignal>
#include <string>
#include <vector>

#include "tests/unit/agent/core/elastic_agent_test_util.hpp"

namespace ddp::agent {
namespace {

using namespace std::chrono_literals;
using test::FakeOutcome;
using test::field;
using test::has_env;
using test::StaticRun;

TEST_CASE(
    "static: a worker failure stops the others, spends a restart, and the next attempt "
    "succeeds",
    "[elastic_agent]") {
  StaticRun job({{FakeOutcome::until_stopped(), FakeOutcome::exits(3, 10ms)},
                 {FakeOutcome::exits(0), FakeOutcome::exits(0, 5ms)}});
  job.run();
  const auto& events = job.events;
  const auto& launcher = job.launcher;

  CHECK(job.exit_code == 0);
  REQUIRE(launcher.launched.size() == 2);
  CHECK(has_env(launcher.launched[0][0], "TORCHELASTIC_RESTART_COUNT=0"));
  CHECK(has_env(launcher.launched[1][0], "TORCHELASTIC_RESTART_COUNT=1"));
  CHECK(launcher.stop_signals == std::vector<int>{SIGTERM});  // the survivor of attempt 0
  CHECK(events.names() == std::vector<std::string>{"rendezvous", "workers_started", "worker_exited",
                                                   "worker_exited", "workers_stopped", "restart",
                                                   "rendezvous", "workers_started", "worker_exited",
                                                   "worker_exited", "finish"});
  const auto exited = events.named("worker_exited");
  CHECK(field<std::int64_t>(exited[0], "rank") == 1);
  CHECK(field<std::int64_t>(exited[0], "exit_code") == 3);
  CHECK(field<std::int64_t>(exited[0], "stopped_by_agent") == 0);
  CHECK(field<std::string>(exited[1], "signal") == "SIGTERM");
  CHECK(field<std::int64_t>(exited[1], "stopped_by_agent") == 1);
  CHECK(field<std::string>(events.named("workers_stopped")[0], "reason") == "failure");
  const Event restart = events.named("restart")[0];
  CHECK(field<std::int64_t>(restart, "restart_spent") == 1);
  CHECK(field<std::int64_t>(restart, "restart_count") == 1);
  CHECK_THAT(field<std::string>(restart, "reason"), Catch::Contains("rank 1"));
  CHECK(field<std::int64_t>(events.named("rendezvous")[1], "restart_count") == 1);
  CHECK(field<std::string>(events.events.back(), "reason") == "succeeded");
}

TEST_CASE("static: when the restarts are spent the agent exits with the root cause's code",
          "[elastic_agent]") {
  StaticRun job({{FakeOutcome::exits(7, 5ms), FakeOutcome::until_stopped()},
                 {FakeOutcome::until_stopped(), FakeOutcome::killed_by(SIGABRT, 5ms)}});
  job.run();
  const auto& events = job.events;

  // The last attempt's first failure (rank 1, SIGABRT), not the worker the agent stopped.
  CHECK(job.exit_code == 128 + SIGABRT);
  CHECK(job.launcher.launched.size() == 2);  // one restart, then no third launch
  CHECK(events.named("restart").size() == 1);
  const Event finish = events.events.back();
  CHECK(finish.name == "finish");
  CHECK(field<std::int64_t>(finish, "exit_code") == 128 + SIGABRT);
  CHECK(field<std::string>(finish, "reason") == "failed");
}

TEST_CASE("static: with --max_restarts=0 the first failure ends the job with its exit code",
          "[elastic_agent]") {
  StaticRun job({{FakeOutcome::until_stopped(), FakeOutcome::exits(2, 5ms)}}, /*max_restarts=*/0);
  job.run();
  const auto& events = job.events;

  CHECK(job.exit_code == 2);
  CHECK(job.launcher.launched.size() == 1);
  CHECK(job.launcher.stop_signals == std::vector<int>{SIGTERM});
  CHECK(events.names() == std::vector<std::string>{"rendezvous", "workers_started", "worker_exited",
                                                   "worker_exited", "workers_stopped", "finish"});
  CHECK(field<std::int64_t>(events.events.back(), "exit_code") == 2);
  CHECK(field<std::string>(events.events.back(), "reason") == "failed");
}

TEST_CASE(
    "static: a signal while workers run is forwarded to them and the agent exits 128+N without "
    "a restart",
    "[elastic_agent]") {
  const int signal = GENERATE(SIGTERM, SIGINT);
  INFO("signal " << signal);
  StaticRun job({{FakeOutcome::until_stopped(), FakeOutcome::until_stopped()}});
  job.run([signal] { ::raise(signal); });
  const auto& events = job.events;

  CHECK(job.exit_code == 128 + signal);      // 143 for SIGTERM, 130 for SIGINT
  CHECK(job.launcher.launched.size() == 1);  // a restart remained, and was not spent
  CHECK(job.launcher.stop_signals == std::vector<int>{signal});
  CHECK(events.names() == std::vector<std::string>{"rendezvous", "workers_started", "worker_exited",
                                                   "worker_exited", "workers_stopped", "finish"});
  for (const Event& exited : events.named("worker_exited")) {
    CHECK(field<std::int64_t>(exited, "stopped_by_agent") == 1);
  }
  CHECK(field<std::string>(events.named("workers_stopped")[0], "reason") == "signal");
  CHECK(field<std::int64_t>(events.events.back(), "exit_code") == 128 + signal);
  CHECK(field<std::string>(events.events.back(), "reason") == "signal");
}

// Rank 0 waits in all_reduce #5; rank 1 completed #4 and has made no progress since: both for an
// hour already, as their progress records say, so the detector's first sample names rank 1.
test::FakeAttempt hung_attempt() {
  return {FakeOutcome::stuck_at(5, 4, 3600s), FakeOutcome::stuck_at(4, 4, 3600s)};
}

TEST_CASE("static: a hang stops the workers and fails the attempt as the hung rank",
          "[elastic_agent]") {
  SECTION("a restart remains: the job restarts and succeeds") {
    StaticRun job({hung_attempt(), {FakeOutcome::exits(0), FakeOutcome::exits(0)}});
    job.config.hang_timeout = 1s;
    job.run();
    const auto& events = job.events;

    CHECK(job.exit_code == 0);
    REQUIRE(job.launcher.launched.size() == 2);
    const auto hangs = events.named("hang");
    REQUIRE(hangs.size() == 1);
    const std::string summary = "hang: rank 1 made no progress while rank 0 waits in all_reduce #5";
    CHECK(field<std::string>(hangs[0], "summary") == summary);
    CHECK(field<std::vector<std::int64_t>>(hangs[0], "ranks") == std::vector<std::int64_t>{1});
    CHECK(field<std::int64_t>(hangs[0], "idle_ms") >= 3'600'000);
    const auto stacks = events.named("stacks");
    REQUIRE(stacks.size() == 1);  // the report, before the workers are stopped
    CHECK(field<std::string>(stacks[0], "reason") == "hang");
    // SIGCONT first, so that a stopped worker can take the SIGTERM.
    CHECK(job.launcher.sent_signals == std::vector<int>{SIGCONT});
    CHECK(job.launcher.stop_signals == std::vector<int>{SIGTERM});
    CHECK(field<std::string>(events.named("workers_stopped")[0], "reason") == "hang");
    const Event restart = events.named("restart")[0];
    CHECK(field<std::int64_t>(restart, "restart_spent") == 1);
    CHECK_THAT(field<std::string>(restart, "reason"), Catch::StartsWith(summary));
  }
  SECTION("the restarts are spent: the hung rank is the root cause") {
    StaticRun job({hung_attempt()}, /*max_restarts=*/0);
    job.config.hang_timeout = 1s;
    job.run();

    CHECK(job.exit_code == 128 + SIGTERM);  // the signal that ended the hung rank
    CHECK(job.launcher.launched.size() == 1);
    CHECK(job.events.named("hang").size() == 1);
    CHECK(field<std::string>(job.events.events.back(), "reason") == "failed");
  }
}

TEST_CASE(
    "static: --monitor_interval is accepted but never waited for: the agent sees each exit "
    "as it happens",
    "[elastic_agent]") {
  StaticRun job({{FakeOutcome::exits(1, 5ms)}, {FakeOutcome::exits(0, 5ms)}});
  job.config.monitor_interval = 1h;  // a poll this slow would outlast run_until's 10 s budget
  job.run();
  CHECK(job.exit_code == 0);
  CHECK(job.launcher.launched.size() == 2);
}

}  // namespace
}  // namespace ddp::agent
