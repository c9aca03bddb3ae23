// ElasticAgent's state machine across nodes: agents over FakeLaunchers on the nodes of one c10d
// cluster (MemoryStore, one io_context): signals, node loss, peer failures, a node joining.

#include <catch2/catch.hpp>
#include <csignal>
#include <string>
#include <vector>

#include "agent/elastic/elastic_agent.hpp"
#include "tests/unit/agent/core/elastic_agent_test_util.hpp"

namespace ddp::agent {
namespace {

using namespace std::chrono_literals;
using rdzv::test::run_until;
using rdzv::test::spawn;
using test::agent_config;
using test::c10d_settings;
using test::C10dAgents;
using test::FakeAttempt;
using test::FakeLauncher;
using test::FakeOutcome;
using test::field;
using test::has_env;
using test::RecordingEventSink;
using test::TempDir;

// Two c10d nodes, --max_restarts=1, whose scripts fail once and then succeed: runs both agents to
// their end and checks what holds for each: exit 0, after one restart, with the restart spent.
struct OneRestartJob {
  explicit OneRestartJob(const std::vector<std::vector<FakeAttempt>>& scripts)
      : config(agent_config(logs, 1, 1)),
        cluster(c10d_settings(2, 2)),
        rig(cluster, config, scripts) {
    rig.start(cluster.io);
    REQUIRE(run_until(cluster.io, [&] { return rdzv::test::all_done(rig.runs); }));
    for (int i = 0; i < 2; ++i) {
      INFO("agent " << i);
      CHECK(rig.runs[i]->get() == 0);
      REQUIRE(rig.launchers[i]->launched.size() == 2);
      CHECK(has_env(rig.launchers[i]->launched[1][0], "TORCHELASTIC_RESTART_COUNT=1"));
      CHECK(rig.events[i]->named("restart").size() == 1);
    }
  }

  TempDir logs;
  LaunchConfig config;
  rdzv::test::Cluster cluster;
  C10dAgents rig;
};

TEST_CASE("c10d: a signal during the rendezvous ends the agent with 128+N and starts nothing",
          "[elastic_agent]") {
  TempDir logs;
  const LaunchConfig config = agent_config(logs, 1, 0);
  rdzv::test::Cluster cluster(c10d_settings(2, 2));  // waits for a second node that never comes
  RecordingEventSink events;
  FakeLauncher launcher({});
  ElasticAgent agent(cluster.io, agent_spec(config, {}), cluster.add_node(), events, launcher);
  auto run = spawn(cluster.io, agent.run());
  rdzv::test::run_for(cluster.io, 100ms);  // the agent is waiting in next_round
  REQUIRE_FALSE(run->done);
  ::raise(SIGHUP);
  REQUIRE(run_until(cluster.io, [&] { return run->done; }));

  CHECK(run->get() == 128 + SIGHUP);
  CHECK(launcher.launched.empty());
  CHECK(events.names() == std::vector<std::string>{"finish"});
  CHECK(field<std::string>(events.events.back(), "reason") == "signal");
}

TEST_CASE("c10d: a lost node stops the workers and re-forms the round without spending a restart",
          "[elastic_agent]") {
  TempDir logs;
  const LaunchConfig config = agent_config(logs, 1, 0);  // no restart to spend
  rdzv::test::Cluster cluster(c10d_settings(2, 3));
  const std::vector<FakeAttempt> script{{FakeOutcome::until_stopped()},
                                        {FakeOutcome::exits(0, 10ms)}};
  C10dAgents rig(cluster, config, {script, script});
  auto& events = rig.events;
  auto& launchers = rig.launchers;
  // The third node joins by hand (no agent), so that the test can kill it mid-round.
  auto third = spawn(cluster.io, cluster.add_node().next_round(1));
  rig.start(cluster.io);
  REQUIRE(run_until(cluster.io, [&] {
    return third->done && launchers[0]->launched.size() == 1 && launchers[1]->launched.size() == 1;
  }));
  REQUIRE(third->get().group_world_size == 3);
  cluster.nodes[2].reset();  // its heartbeats stop, as when its agent is SIGKILLed
  REQUIRE(run_until(cluster.io, [&] { return rdzv::test::all_done(rig.runs); }));

  for (int i = 0; i < 2; ++i) {
    INFO("agent " << i);
    CHECK(rig.runs[i]->get() == 0);
    REQUIRE(launchers[i]->launched.size() == 2);
    CHECK(launchers[i]->stop_signals == std::vector<int>{SIGTERM});
    CHECK(has_env(launchers[i]->launched[1][0], "TORCHELASTIC_RESTART_COUNT=0"));
    CHECK(has_env(launchers[i]->launched[1][0], "GROUP_WORLD_SIZE=2"));
    const auto lost = events[i]->named("node_lost");
    REQUIRE(lost.size() == 1);
    CHECK(field<std::string>(lost[0], "node") == "n2");
    CHECK(field<std::string>(lost[0], "detected_by") == "heartbeat");
    const auto restarts = events[i]->named("restart");
    REQUIRE(restarts.size() == 1);
    CHECK(field<std::int64_t>(restarts[0], "restart_spent") == 0);
    CHECK(field<std::string>(restarts[0], "round_change") == "node_lost");
    CHECK(field<std::string>(events[i]->named("workers_stopped")[0], "reason") == "round_change");
  }
}

TEST_CASE(
    "c10d: a worker failure that follows a node's loss re-forms the round without spending a "
    "restart",
    "[elastic_agent]") {
  TempDir logs;
  const LaunchConfig config = agent_config(logs, 1, 0);  // a spent restart would end the job
  rdzv::test::Cluster cluster(c10d_settings(2, 3));
  // The workers fail 30 ms after their start, before heartbeats can tell that the third node is
  // gone (their collectives broke with it): the failure waits for the loss verdict.
  const std::vector<FakeAttempt> script{{FakeOutcome::exits(1, 30ms)},
                                        {FakeOutcome::exits(0, 10ms)}};
  C10dAgents rig(cluster, config, {script, script});
  auto third = spawn(cluster.io, cluster.add_node().next_round(1));
  rig.start(cluster.io);
  REQUIRE(run_until(cluster.io, [&] {
    return third->done && !rig.launchers[0]->launched.empty() &&
           !rig.launchers[1]->launched.empty();
  }));
  cluster.nodes[2].reset();
  REQUIRE(run_until(cluster.io, [&] { return rdzv::test::all_done(rig.runs); }));

  for (int i = 0; i < 2; ++i) {
    INFO("agent " << i);
    CHECK(rig.runs[i]->get() == 0);
    REQUIRE(rig.launchers[i]->launched.size() == 2);
    CHECK(has_env(rig.launchers[i]->launched[1][0], "GROUP_WORLD_SIZE=2"));
    CHECK(has_env(rig.launchers[i]->launched[1][0], "TORCHELASTIC_RESTART_COUNT=0"));
    CHECK(field<std::string>(rig.events[i]->named("workers_stopped")[0], "reason") == "failure");
    CHECK(field<std::string>(rig.events[i]->named("node_lost").at(0), "node") == "n2");
    const auto restarts = rig.events[i]->named("restart");
    REQUIRE(restarts.size() == 1);
    CHECK(field<std::int64_t>(restarts[0], "restart_spent") == 0);
    CHECK(field<std::string>(restarts[0], "round_change") == "node_lost");
  }
}

TEST_CASE("c10d: one node's worker failure restarts both nodes and spends one job-wide restart",
          "[elastic_agent]") {
  OneRestartJob job({{{FakeOutcome::exits(1, 20ms)}, {FakeOutcome::exits(0)}},
                     {{FakeOutcome::until_stopped()}, {FakeOutcome::exits(0, 10ms)}}});
  const C10dAgents& rig = job.rig;
  // The failing node spent the restart; its peer restarted because of it, spending none.
  const Event spent = rig.events[0]->named("restart")[0];
  CHECK(field<std::int64_t>(spent, "restart_spent") == 1);
  CHECK(field<std::int64_t>(spent, "restart_count") == 1);
  const Event followed = rig.events[1]->named("restart")[0];
  CHECK(field<std::int64_t>(followed, "restart_spent") == 0);
  CHECK(field<std::string>(followed, "round_change") == "peer_failed");
}

TEST_CASE(
    "c10d: a node whose workers succeeded leaves the exit barrier and restarts when a peer's "
    "workers fail",
    "[elastic_agent]") {
  OneRestartJob job({{{FakeOutcome::exits(0)}, {FakeOutcome::exits(0)}},
                     {{FakeOutcome::exits(1, 50ms)}, {FakeOutcome::exits(0, 5ms)}}});
  const C10dAgents& rig = job.rig;
  // Node 0 had nothing to stop: its worker had exited 0 when node 1's failed.
  const auto& waited = *rig.events[0];
  CHECK(rig.launchers[0]->stop_signals.empty());
  CHECK(waited.names() == std::vector<std::string>{"rendezvous", "workers_started", "worker_exited",
                                                   "restart", "rendezvous", "workers_started",
                                                   "worker_exited", "finish"});
  const Event followed = waited.named("restart")[0];
  CHECK(field<std::int64_t>(followed, "restart_spent") == 0);
  CHECK(field<std::string>(followed, "round_change") == "peer_failed");
  CHECK(field<std::int64_t>(rig.events[1]->named("restart")[0], "restart_spent") == 1);
}

TEST_CASE(
    "c10d: a signal ends a node waiting in the exit barrier and a node with running workers alike",
    "[elastic_agent]") {
  TempDir logs;
  const LaunchConfig config = agent_config(logs, 1, 1);
  rdzv::test::Cluster cluster(c10d_settings(2, 2));
  C10dAgents rig(cluster, config, {{{FakeOutcome::exits(0)}}, {{FakeOutcome::until_stopped()}}});
  rig.start(cluster.io);
  // Node 0's worker has succeeded (it waits for node 1 in the exit barrier); node 1's runs.
  REQUIRE(run_until(cluster.io, [&] {
    return !rig.events[0]->named("worker_exited").empty() && !rig.launchers[1]->launched.empty();
  }));
  rdzv::test::run_for(cluster.io, 50ms);
  REQUIRE_FALSE(rig.runs[0]->done);
  ::raise(SIGTERM);  // the process's signal: both agents' signal sets take it
  REQUIRE(run_until(cluster.io, [&] { return rdzv::test::all_done(rig.runs); }));

  for (int i = 0; i < 2; ++i) {
    INFO("agent " << i);
    CHECK(rig.runs[i]->get() == 128 + SIGTERM);
    CHECK(rig.launchers[i]->launched.size() == 1);
    const Event finish = rig.events[i]->events.back();
    CHECK(finish.name == "finish");
    CHECK(field<std::string>(finish, "reason") == "signal");
  }
  CHECK(rig.launchers[0]->stop_signals.empty());  // nothing left to stop
  CHECK(rig.launchers[1]->stop_signals == std::vector<int>{SIGTERM});
}

TEST_CASE(
    "c10d: a node joining a running job restarts the running node at the larger world without "
    "spending a restart",
    "[elastic_agent]") {
  TempDir logs;
  const LaunchConfig config = agent_config(logs, 1, 0);  // no restart to spend
  rdzv::test::Cluster cluster(c10d_settings(1, 2));
  C10dAgents rig(cluster, config,
                 {{{FakeOutcome::until_stopped()}, {FakeOutcome::exits(0, 10ms)}}});
  rig.start(cluster.io);
  REQUIRE(run_until(cluster.io, [&] { return rig.launchers[0]->launched.size() == 1; }));
  CHECK(has_env(rig.launchers[0]->launched[0][0], "GROUP_WORLD_SIZE=1"));
  rig.add(cluster, config, {{FakeOutcome::exits(0, 10ms)}});  // the new node
  rig.start_next(cluster.io);
  REQUIRE(run_until(cluster.io, [&] { return rdzv::test::all_done(rig.runs); }));

  CHECK(rig.runs[0]->get() == 0);
  CHECK(rig.runs[1]->get() == 0);
  const auto& running = *rig.launchers[0];
  REQUIRE(running.launched.size() == 2);
  CHECK(running.stop_signals == std::vector<int>{SIGTERM});
  const std::vector<const WorkerSpec*> larger{&running.launched[1][0],
                                              &rig.launchers[1]->launched.at(0)[0]};
  for (const WorkerSpec* spec : larger) {
    CHECK(has_env(*spec, "GROUP_WORLD_SIZE=2"));
    CHECK(has_env(*spec, "WORLD_SIZE=2"));
    CHECK(has_env(*spec, "TORCHELASTIC_RESTART_COUNT=0"));
  }
  const auto restarts = rig.events[0]->named("restart");
  REQUIRE(restarts.size() == 1);
  CHECK(field<std::int64_t>(restarts[0], "restart_spent") == 0);
  CHECK(field<std::string>(restarts[0], "round_change") == "node_waiting");
  CHECK(field<std::string>(rig.events[0]->named("workers_stopped")[0], "reason") == "round_change");
  CHECK(rig.events[1]->named("restart").empty());
}

}  // namespace
}  // namespace ddp::agent
