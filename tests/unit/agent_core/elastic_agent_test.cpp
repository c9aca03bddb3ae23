// ElasticAgent's state machine with no processes: a FakeLauncher scripts the workers, a
// RecordingEventSink reads back what the agent did, and the rendezvous is real (static on a
// loopback store, c10d over MemoryStore), all on one io_context.

#include "agent/elastic_agent.hpp"

#include <unistd.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rendezvous/static_rendezvous.hpp"
#include "tests/unit/agent_core/fake_launcher.hpp"
#include "tests/unit/agent_core/recording_event_sink.hpp"
#include "tests/unit/rendezvous/c10d_test_util.hpp"

namespace ddp::agent {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using rdzv::test::run_until;
using rdzv::test::spawn;
using test::FakeAttempt;
using test::FakeLauncher;
using test::FakeOutcome;
using test::field;
using test::RecordingEventSink;

// A per-test log directory base, removed at the end.
struct TempLogDir {
  TempLogDir()
      : path(std::filesystem::temp_directory_path() /
             ("ddp_elastic_agent_test_" + std::to_string(::getpid()) + "_" +
              std::to_string(counter()++))) {
    std::filesystem::create_directories(path);
  }
  ~TempLogDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  static int& counter() {
    static int n = 0;
    return n;
  }
  std::filesystem::path path;
};

LaunchConfig agent_config(const TempLogDir& logs, int nproc, int max_restarts) {
  LaunchConfig config;
  config.nproc_per_node = nproc;
  config.max_restarts = max_restarts;
  config.rdzv_id = "test";
  config.no_python = true;
  config.training_script = "/bin/true";  // never run: the launcher is a fake
  config.log_dir = logs.path.string();
  config.shutdown_timeout = 1s;
  return config;
}

rdzv::StaticRendezvousOptions one_static_node(int max_restarts) {
  rdzv::StaticRendezvousOptions options;
  options.run_id = "test";
  options.timeout = 10s;
  options.leave_timeout = 2s;
  options.max_restarts = max_restarts;
  options.node_name = "node0";
  return options;
}

// c10d settings whose rounds carry no worker store, so the agent's stack service stays idle.
rdzv::C10dSettings c10d_settings(int min_nodes, int max_nodes) {
  rdzv::C10dSettings s = rdzv::test::fast_settings(min_nodes, max_nodes);
  s.store_host = "";
  s.store_port = 0;
  return s;
}

bool has_env(const WorkerSpec& spec, const std::string& entry) {
  return std::find(spec.env.begin(), spec.env.end(), entry) != spec.env.end();
}

// One node's agent with two workers and --max_restarts=1 on the static rendezvous (its own loopback
// store), run until it returns.
struct StaticRun {
  explicit StaticRun(std::vector<FakeAttempt> script) : launcher(std::move(script)) {
    const LaunchConfig config = agent_config(logs, 2, 1);
    boost::asio::io_context io;
    rdzv::StaticRendezvous rendezvous(io, one_static_node(1));
    ElasticAgent agent(io, config, {}, rendezvous, events, &launcher);
    auto run = spawn(io, agent.run());
    REQUIRE(run_until(io, [&] { return run->done; }));
    exit_code = run->get();
  }

  TempLogDir logs;
  RecordingEventSink events;
  FakeLauncher launcher;
  int exit_code = -1;
};

// Agents on nodes of one c10d Cluster, each with its own fake launcher and event sink.
struct C10dAgents {
  C10dAgents(rdzv::test::Cluster& cluster, const LaunchConfig& config,
             const std::vector<std::vector<FakeAttempt>>& scripts) {
    for (const auto& script : scripts) {
      events.push_back(std::make_unique<RecordingEventSink>());
      launchers.push_back(std::make_unique<FakeLauncher>(script));
      agents.push_back(std::make_unique<ElasticAgent>(
          cluster.io, config, std::map<std::string, std::string>{}, cluster.add_node(),
          *events.back(), launchers.back().get()));
    }
  }
  void start(boost::asio::io_context& io) {
    for (auto& agent : agents) runs.push_back(spawn(io, agent->run()));
  }

  std::vector<std::unique_ptr<RecordingEventSink>> events;
  std::vector<std::unique_ptr<FakeLauncher>> launchers;
  std::vector<std::unique_ptr<ElasticAgent>> agents;
  std::vector<std::shared_ptr<rdzv::test::Outcome<int>>> runs;
};

TEST_CASE(
    "static: a worker failure stops the others, spends a restart, and the next attempt "
    "succeeds",
    "[elastic_agent]") {
  StaticRun job({{FakeOutcome::until_stopped(), FakeOutcome::exits(3, 10ms)},
                 {FakeOutcome::exits(0), FakeOutcome::exits(0, 5ms)}});
  const RecordingEventSink& events = job.events;
  const FakeLauncher& launcher = job.launcher;
  const int exit_code = job.exit_code;

  CHECK(exit_code == 0);
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
  const RecordingEventSink& events = job.events;
  const FakeLauncher& launcher = job.launcher;
  const int exit_code = job.exit_code;

  // The last attempt's first failure (rank 1, SIGABRT), not the worker the agent stopped.
  CHECK(exit_code == 128 + SIGABRT);
  CHECK(launcher.launched.size() == 2);  // one restart, then no third launch
  CHECK(events.named("restart").size() == 1);
  const Event finish = events.events.back();
  CHECK(finish.name == "finish");
  CHECK(field<std::int64_t>(finish, "exit_code") == 128 + SIGABRT);
  CHECK(field<std::string>(finish, "reason") == "failed");
}

TEST_CASE("c10d: a signal during the rendezvous ends the agent with 128+N and starts nothing",
          "[elastic_agent]") {
  TempLogDir logs;
  const LaunchConfig config = agent_config(logs, 1, 0);
  rdzv::test::Cluster cluster(c10d_settings(2, 2));  // waits for a second node that never comes
  RecordingEventSink events;
  FakeLauncher launcher({});
  ElasticAgent agent(cluster.io, config, {}, cluster.add_node(), events, &launcher);
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
  TempLogDir logs;
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

TEST_CASE("c10d: one node's worker failure restarts both nodes and spends one job-wide restart",
          "[elastic_agent]") {
  TempLogDir logs;
  const LaunchConfig config = agent_config(logs, 1, 1);
  rdzv::test::Cluster cluster(c10d_settings(2, 2));
  C10dAgents rig(cluster, config,
                 {{{FakeOutcome::exits(1, 20ms)}, {FakeOutcome::exits(0)}},
                  {{FakeOutcome::until_stopped()}, {FakeOutcome::exits(0, 10ms)}}});
  rig.start(cluster.io);
  REQUIRE(run_until(cluster.io, [&] { return rdzv::test::all_done(rig.runs); }));

  for (int i = 0; i < 2; ++i) {
    INFO("agent " << i);
    CHECK(rig.runs[i]->get() == 0);
    REQUIRE(rig.launchers[i]->launched.size() == 2);
    CHECK(has_env(rig.launchers[i]->launched[1][0], "TORCHELASTIC_RESTART_COUNT=1"));
    CHECK(rig.events[i]->named("restart").size() == 1);
  }
  // The failing node spent the restart; its peer restarted because of it, spending none.
  const Event spent = rig.events[0]->named("restart")[0];
  CHECK(field<std::int64_t>(spent, "restart_spent") == 1);
  CHECK(field<std::int64_t>(spent, "restart_count") == 1);
  const Event followed = rig.events[1]->named("restart")[0];
  CHECK(field<std::int64_t>(followed, "restart_spent") == 0);
  CHECK(field<std::string>(followed, "round_change") == "peer_failed");
}

// Two nodes in one round, the other of which never answers: watch_round and failure_verdict wait
// until cancelled, as the etcd verdict waits out a lease TTL for a frozen peer.
class SilentPeerRendezvous final : public rdzv::Rendezvous {
 public:
  asio::awaitable<rdzv::RendezvousInfo> next_round(int local_world_size) override {
    rdzv::RendezvousInfo info;
    info.run_id = "test";
    info.group_world_size = 2;
    info.world_size = 2 * local_world_size;
    co_return info;
  }
  asio::awaitable<rdzv::RoundEvent> watch_round() override {
    co_await forever();
    co_return rdzv::RoundEvent{rdzv::RoundChange::kPeerFailed, "cancelled"};
  }
  asio::awaitable<int> report_failure(std::string) override { co_return ++reported; }
  asio::awaitable<std::optional<rdzv::RoundEvent>> failure_verdict(
      std::chrono::steady_clock::time_point) override {
    in_verdict = true;
    co_await forever();
    co_return std::nullopt;
  }
  asio::awaitable<void> finish(bool) override { co_return; }

  bool in_verdict = false;
  int reported = 0;

 private:
  static asio::awaitable<void> forever() {
    asio::steady_timer timer(co_await asio::this_coro::executor,
                             std::chrono::steady_clock::time_point::max());
    co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  }
};

TEST_CASE("a signal during the failure verdict ends the agent at once, spending no restart",
          "[elastic_agent]") {
  TempLogDir logs;
  const LaunchConfig config = agent_config(logs, 1, 3);
  asio::io_context io;
  SilentPeerRendezvous rendezvous;
  RecordingEventSink events;
  FakeLauncher launcher({{FakeOutcome::exits(3, 10ms)}});
  ElasticAgent agent(io, config, {}, rendezvous, events, &launcher);
  auto run = spawn(io, agent.run());
  REQUIRE(run_until(io, [&] { return rendezvous.in_verdict; }));
  ::raise(SIGTERM);
  REQUIRE(run_until(io, [&] { return run->done; }));

  CHECK(run->get() == 128 + SIGTERM);
  CHECK(rendezvous.reported == 0);
  CHECK(launcher.launched.size() == 1);
  CHECK(events.names() == std::vector<std::string>{"rendezvous", "workers_started", "worker_exited",
                                                   "workers_stopped", "finish"});
  CHECK(field<std::string>(events.named("workers_stopped")[0], "reason") == "failure");
  CHECK(field<std::string>(events.events.back(), "reason") == "signal");
}

}  // namespace
}  // namespace ddp::agent
