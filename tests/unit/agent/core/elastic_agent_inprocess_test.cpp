// ElasticAgent with --recovery=inprocess over FakeLaunchers and FakeHandovers on the nodes of one
// c10d cluster (and one static node): live workers keep running through a round change and take
// their new places; a worker that does not re-form costs its node a start in the same round, and
// no restart; a worker that fails is started again alone, for a restart.

#include <catch2/catch.hpp>
#include <csignal>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "agent/elastic/elastic_agent.hpp"
#include "agent/elastic/inprocess_recovery.hpp"
#include "tests/unit/agent/core/elastic_agent_test_util.hpp"
#include "tests/unit/agent/core/fake_handover.hpp"

namespace ddp::agent {
namespace {

using namespace std::chrono_literals;
using rdzv::test::run_until;
using rdzv::test::spawn;
using test::agent_config;
using test::c10d_settings;
using test::C10dAgents;
using test::FakeAttempt;
using test::FakeHandover;
using test::FakeOutcome;
using test::field;
using test::has_env;
using test::TempDir;

// Two agents with --recovery=inprocess and a third node joined by hand, which the test kills
// once every agent has started its workers. The workers exit 0 0.8 s after their start: long
// after fast_settings' heartbeats (120 ms) find the loss, so they exit in the re-formed round.
struct LostNodeJob {
  // `stuck` holds agent 0's local ranks that never re-form; `hellos` the pids that agent 0's
  // channel last heard from, by local rank.
  explicit LostNodeJob(const std::vector<std::vector<FakeAttempt>>& scripts,
                       std::set<int> stuck = {}, std::map<int, int> hellos = {})
      : config(inprocess_config(logs)), cluster(c10d_settings(2, 3)), rig(cluster, config, {}) {
    handovers[0].not_reforming = std::move(stuck);
    handovers[0].hellos = std::move(hellos);
    for (std::size_t i = 0; i < scripts.size(); ++i) {
      rig.add(cluster, config, scripts[i], &handovers[i]);
    }
    auto third = spawn(cluster.io, cluster.add_node().next_round(1));
    rig.start(cluster.io);
    REQUIRE(run_until(cluster.io, [&] {
      return third->done && !rig.launchers[0]->launched.empty() &&
             !rig.launchers[1]->launched.empty();
    }));
    REQUIRE(third->get().group_world_size == 3);
    cluster.nodes[2].reset();  // its heartbeats stop, as when its agent is SIGKILLed
    REQUIRE(run_until(cluster.io, [&] { return rdzv::test::all_done(rig.runs); }));
  }

  static LaunchConfig inprocess_config(const TempDir& logs) {
    LaunchConfig config = agent_config(logs, 1, 0);  // a spent restart would end the job
    config.recovery = "inprocess";
    return config;
  }

  TempDir logs;
  LaunchConfig config;
  rdzv::test::Cluster cluster;
  FakeHandover handovers[2];
  C10dAgents rig;
};

std::string place_env(const WorkerPlace& place, const std::string& key) {
  const auto it = place.env.find(key);
  return it == place.env.end() ? "<unset>" : it->second;
}

TEST_CASE("inprocess: the peers of a lost node keep their workers and hand them the next round",
          "[elastic_agent][inprocess]") {
  const FakeAttempt runs_on{FakeOutcome::exits(0, 800ms)};
  LostNodeJob job({{runs_on}, {runs_on}});

  for (int i = 0; i < 2; ++i) {
    INFO("agent " << i);
    const auto& launcher = *job.rig.launchers[i];
    const auto& events = *job.rig.events[i];
    const FakeHandover& handover = job.handovers[i];
    CHECK(job.rig.runs[i]->get() == 0);
    REQUIRE(launcher.launched.size() == 1);  // the same workers all along
    CHECK(launcher.stop_signals.empty());
    CHECK(has_env(launcher.launched[0][0], "DDPRUN_REFORM_SOCKET=@fake-reform"));
    CHECK(has_env(launcher.launched[0][0], "DDPRUN_REFORM_LOCAL_RANK=0"));
    // The places of the first round (read by the workers on connecting), then the hand-over's.
    REQUIRE(handover.published.size() == 2);
    const WorkerPlace& before = handover.published[0].at(0);
    const WorkerPlace& after = handover.published[1].at(0);
    CHECK(after.round == before.round + 1);
    CHECK(place_env(before, "WORLD_SIZE") == "3");
    CHECK(place_env(after, "WORLD_SIZE") == "2");
    CHECK(place_env(after, "GROUP_WORLD_SIZE") == "2");
    CHECK(place_env(after, "TORCHELASTIC_RESTART_COUNT") == "0");
    CHECK(place_env(after, "MASTER_PORT") != "<unset>");
    CHECK(handover.waited_rounds == std::vector<int>{after.round});

    CHECK(events.named("restart").empty());
    CHECK(events.named("workers_stopped").empty());
    REQUIRE(events.named("node_lost").size() == 1);
    CHECK(field<std::string>(events.named("node_lost")[0], "node") == "n2");
    const auto reforms = events.named("reform");
    REQUIRE(reforms.size() == 1);
    CHECK(field<std::int64_t>(reforms[0], "round") == after.round);
    CHECK(field<std::string>(reforms[0], "cause") == "node_lost");
    CHECK(field<std::int64_t>(reforms[0], "ms") >= 0);
  }
}

TEST_CASE(
    "inprocess: a process that has not connected yet where an earlier one of its local rank did "
    "joins the next round as a newcomer: not waited for, not stopped",
    "[elastic_agent][inprocess]") {
  const FakeAttempt runs_on{FakeOutcome::exits(0, 800ms)};
  // Local rank 0 never reports a re-form, and its channel last heard from pid 1, an earlier
  // process: the one running now has not connected yet.
  LostNodeJob job({{runs_on}, {runs_on}}, {0}, {{0, 1}});

  const auto& launcher = *job.rig.launchers[0];
  const auto& events = *job.rig.events[0];
  CHECK(job.rig.runs[0]->get() == 0);
  CHECK(launcher.launched.size() == 1);
  CHECK(launcher.stop_signals.empty());
  CHECK(events.named("reform_failed").empty());
  CHECK(events.named("workers_stopped").empty());
  const auto reforms = events.named("reform");
  REQUIRE(reforms.size() == 1);
  CHECK(field<std::int64_t>(reforms[0], "workers") == 0);  // nothing kept to wait for
  // Its place is published for it to read on connecting.
  REQUIRE(job.handovers[0].published.size() == 2);
  CHECK(job.handovers[0].published[1].at(0).round == job.handovers[0].published[0].at(0).round + 1);
}

TEST_CASE(
    "inprocess: a worker that does not re-form is stopped and its node's workers start again in "
    "the same round, spending no restart",
    "[elastic_agent][inprocess]") {
  const FakeAttempt runs_on{FakeOutcome::exits(0, 800ms)};
  const FakeAttempt newcomer{FakeOutcome::exits(0, 10ms)};
  LostNodeJob job({{runs_on, newcomer}, {runs_on}}, {0});

  const auto& stuck = *job.rig.launchers[0];
  const auto& events = *job.rig.events[0];
  CHECK(job.rig.runs[0]->get() == 0);
  REQUIRE(stuck.launched.size() == 2);
  CHECK(stuck.stop_signals == std::vector<int>{SIGTERM});
  CHECK(has_env(stuck.launched[1][0], "GROUP_WORLD_SIZE=2"));
  CHECK(has_env(stuck.launched[1][0], "TORCHELASTIC_RESTART_COUNT=0"));
  // The same restart count, but a folder of their own: the stopped workers' logs stay.
  CHECK(stuck.launched[0][0].log_dir.ends_with("/attempt_0/0"));
  CHECK(stuck.launched[1][0].log_dir.ends_with("/attempt_0.1/0"));
  CHECK(stuck.launched[1][0].stderr_path.find("/attempt_0.1/0/") != std::string::npos);
  // Round 0 at the start, round 1 at the hand-over and again for the newcomer.
  REQUIRE(job.handovers[0].published.size() == 3);
  CHECK(job.handovers[0].published[2].at(0).round == job.handovers[0].published[1].at(0).round);
  CHECK(events.named("reform").empty());
  const auto failed = events.named("reform_failed");
  REQUIRE(failed.size() == 1);
  CHECK(field<std::vector<std::int64_t>>(failed[0], "local_ranks") == std::vector<std::int64_t>{0});
  CHECK(field<std::string>(failed[0], "reason") == "no_channel");
  CHECK(field<std::string>(events.named("workers_stopped").at(0), "reason") == "reform_failed");
  CHECK(events.named("restart").empty());

  // The other node's workers re-formed and never stopped.
  CHECK(job.rig.runs[1]->get() == 0);
  CHECK(job.rig.launchers[1]->launched.size() == 1);
  CHECK(job.rig.events[1]->named("reform").size() == 1);
}

TEST_CASE(
    "inprocess: a worker that exits 3 is started again alone, its sibling keeps running, and one "
    "restart is spent",
    "[elastic_agent][inprocess]") {
  // Local rank 1 fails 50 ms in; its sibling finishes at 400 ms, its new process at 100 ms.
  test::StaticRun job({{FakeOutcome::exits(0, 400ms), FakeOutcome::exits(3, 50ms)}}, 1,
                      {FakeOutcome::exits(0, 100ms)});
  job.config.recovery = "inprocess";
  FakeHandover handover;
  job.handover = &handover;
  job.run();

  CHECK(job.exit_code == 0);
  REQUIRE(job.launcher.launched.size() == 1);  // no second launch: the sibling kept running
  CHECK(job.launcher.stop_signals.empty());
  REQUIRE(job.launcher.replaced.size() == 1);
  const WorkerSpec& newcomer = job.launcher.replaced[0];
  CHECK(newcomer.local_rank == 1);
  CHECK(has_env(newcomer, "TORCHELASTIC_RESTART_COUNT=1"));
  CHECK(has_env(newcomer, "DDPRUN_REFORM_LOCAL_RANK=1"));
  CHECK(newcomer.log_dir.find("attempt_1") != std::string::npos);

  // The newcomer's place was published before it started; only the sibling was waited for.
  REQUIRE(handover.published.size() == 3);  // round 0, round 1 for the newcomer, the hand-over
  CHECK(handover.published[1].at(1).round == handover.published[0].at(1).round + 1);
  CHECK(place_env(handover.published[1].at(1), "TORCHELASTIC_RESTART_COUNT") == "1");
  CHECK(handover.waited_rounds == std::vector<int>{handover.published[1].at(1).round});

  const auto& events = job.events;
  const auto restarts = events.named("restart");
  REQUIRE(restarts.size() == 1);
  CHECK(field<std::int64_t>(restarts[0], "restart_spent") == 1);
  CHECK(field<std::int64_t>(restarts[0], "restart_count") == 1);
  CHECK(events.named("workers_stopped").empty());
  CHECK(events.named("workers_started").size() == 1);
  const auto replaced = events.named("worker_replaced");
  REQUIRE(replaced.size() == 1);
  CHECK(field<std::int64_t>(replaced[0], "local_rank") == 1);
  CHECK(field<std::int64_t>(replaced[0], "pid") == 11'000'000);
  const auto reforms = events.named("reform");
  REQUIRE(reforms.size() == 1);
  CHECK(field<std::string>(reforms[0], "cause") == "worker_failed");
  CHECK(field<std::int64_t>(reforms[0], "workers") == 1);
  // The failure, then the sibling's and the newcomer's successes: nothing stopped by the agent.
  const auto exits = events.named("worker_exited");
  REQUIRE(exits.size() == 3);
  CHECK(field<std::int64_t>(exits[0], "exit_code") == 3);
  for (const auto& exit : exits) CHECK(field<std::int64_t>(exit, "stopped_by_agent") == 0);
}

TEST_CASE("inprocess: a hung worker is stopped and started again alone; its sibling re-forms",
          "[elastic_agent][inprocess]") {
  // Local rank 0 waits in all_reduce #5, local rank 1 made no progress after #4 (an hour
  // already): the detector names rank 1. Its new process exits 5, with the restarts spent.
  const FakeAttempt hung{FakeOutcome::stuck_at(5, 4, 3600s), FakeOutcome::stuck_at(4, 4, 3600s)};
  test::StaticRun job({hung}, 1, {FakeOutcome::exits(5, 50ms)});
  job.config.recovery = "inprocess";
  job.config.hang_timeout = 1s;
  FakeHandover handover;
  job.handover = &handover;
  job.run();

  CHECK(job.exit_code == 5);  // the new process's failure: the hung one was replaced
  CHECK(job.launcher.launched.size() == 1);
  CHECK(job.launcher.worker_stops == std::vector<int>{1});  // only the hung rank
  CHECK(job.launcher.sent_signals.empty());                 // no SIGCONT to every worker
  REQUIRE(job.launcher.replaced.size() == 1);
  CHECK(job.launcher.replaced[0].local_rank == 1);
  CHECK(handover.waited_rounds.size() == 1);  // the sibling was handed its place
  const auto& events = job.events;
  REQUIRE(events.named("hang").size() == 1);
  const auto restarts = events.named("restart");
  REQUIRE(restarts.size() == 1);
  CHECK_THAT(field<std::string>(restarts[0], "reason"), Catch::StartsWith("hang: rank 1"));
  REQUIRE(events.named("reform").size() == 1);
  CHECK(field<std::string>(events.named("reform")[0], "cause") == "worker_failed");
  const auto exits = events.named("worker_exited");
  REQUIRE(!exits.empty());
  CHECK(field<std::int64_t>(exits[0], "local_rank") == 1);
  CHECK(field<std::int64_t>(exits[0], "stopped_by_agent") == 1);
  // The sibling was stopped only when the restarts were spent, after the new process failed.
  const auto stopped = events.named("workers_stopped");
  REQUIRE(stopped.size() == 1);
  CHECK(field<std::string>(stopped[0], "reason") == "failure");
}

TEST_CASE("restart: a worker that exits 3 stops its sibling and both start again",
          "[elastic_agent][inprocess]") {
  const FakeAttempt first{FakeOutcome::exits(0, 400ms), FakeOutcome::exits(3, 50ms)};
  const FakeAttempt second{FakeOutcome::exits(0, 10ms), FakeOutcome::exits(0, 10ms)};
  test::StaticRun job({first, second}, 1);
  job.run();

  CHECK(job.exit_code == 0);
  CHECK(job.launcher.launched.size() == 2);
  CHECK(job.launcher.replaced.empty());
  CHECK(job.launcher.stop_signals == std::vector<int>{SIGTERM});
  CHECK(job.events.named("restart").size() == 1);
  CHECK(field<std::string>(job.events.named("workers_stopped").at(0), "reason") == "failure");
}

TEST_CASE(
    "inprocess: when the restarts are spent, a failure stops the live sibling and is reported",
    "[elastic_agent][inprocess]") {
  test::StaticRun job({{FakeOutcome::until_stopped(), FakeOutcome::exits(3, 50ms)}}, 1,
                      {FakeOutcome::exits(5, 50ms)});
  job.config.recovery = "inprocess";
  FakeHandover handover;
  job.handover = &handover;
  job.run();

  CHECK(job.exit_code == 5);  // the newcomer's failure, not the replaced one's
  CHECK(job.launcher.launched.size() == 1);
  CHECK(job.launcher.replaced.size() == 1);
  CHECK(job.launcher.stop_signals == std::vector<int>{SIGTERM});
  CHECK(job.events.named("restart").size() == 1);
  CHECK(field<std::string>(job.events.named("workers_stopped").at(0), "reason") == "failure");
}

TEST_CASE("inprocess: a place carries the round's variables, and kept workers keep their files",
          "[inprocess]") {
  WorkerSpec next;
  next.local_rank = 1;
  next.log_dir = "/run/attempt_1/1";
  next.ddprun_env = {{"RANK", "3"},
                     {"WORLD_SIZE", "4"},
                     {"MASTER_PORT", "4711"},
                     {"TORCHELASTIC_RESTART_COUNT", "1"},
                     {"DDPRUN_PROGRESS_FILE", "/run/attempt_1/1/progress"},
                     {"ROLE_NAME", "default"}};
  next.env = {"DDPRUN_PROGRESS_FILE=/run/attempt_1/1/progress", "PATH=/bin", "RANK=3"};
  const WorkerPlace place = place_of(7, next);
  CHECK(place.round == 7);
  CHECK(place.local_rank == 1);
  CHECK(place.env == std::map<std::string, std::string>{{"MASTER_PORT", "4711"},
                                                        {"RANK", "3"},
                                                        {"TORCHELASTIC_RESTART_COUNT", "1"},
                                                        {"WORLD_SIZE", "4"}});

  WorkerSpec started = next;
  started.log_dir = "/run/attempt_0/1";
  started.ddprun_env["DDPRUN_PROGRESS_FILE"] = "/run/attempt_0/1/progress";
  std::vector<WorkerSpec> specs{next};
  keep_started_files(specs, {started});
  CHECK(specs[0].log_dir == "/run/attempt_0/1");
  CHECK(specs[0].ddprun_env.at("DDPRUN_PROGRESS_FILE") == "/run/attempt_0/1/progress");
  CHECK(specs[0].env == std::vector<std::string>{"DDPRUN_PROGRESS_FILE=/run/attempt_0/1/progress",
                                                 "PATH=/bin", "RANK=3"});
  CHECK(specs[0].ddprun_env.at("RANK") == "3");  // the new round's place stays
}

}  // namespace
}  // namespace ddp::agent
