#pragma once
// What the ElasticAgent tests share: a log directory per test, the agent's and the rendezvous'
// settings for tests, and rigs that run agents over a fake launcher (one static node; c10d nodes
// of one MemoryStore cluster) on one io_context until they return.

#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/cli/agent_options.hpp"
#include "agent/elastic/elastic_agent.hpp"
#include "rendezvous/static/static_rendezvous.hpp"
#include "tests/unit/agent/core/fake_launcher.hpp"
#include "tests/unit/common/temp_dir.hpp"
#include "tests/unit/agent/core/recording_event_sink.hpp"
#include "tests/unit/rendezvous/c10d/c10d_test_util.hpp"

namespace ddp::agent::test {

using namespace std::chrono_literals;

using ddp::test::TempDir;  // each test's --log_dir

inline LaunchConfig agent_config(const TempDir& logs, int nproc, int max_restarts) {
  LaunchConfig config;
  config.nproc_per_node = nproc;
  config.max_restarts = max_restarts;
  config.rdzv_id = "test";
  config.no_python = true;
  config.training_script = "/bin/true";  // never run: the launcher is a fake
  config.log_dir = logs.path();
  config.shutdown_timeout = 1s;
  return config;
}

inline rdzv::StaticRendezvousOptions one_static_node(int max_restarts) {
  rdzv::StaticRendezvousOptions options;
  options.run_id = "test";
  options.timeout = 10s;
  options.leave_timeout = 2s;
  options.max_restarts = max_restarts;
  options.node_name = "node0";
  return options;
}

// c10d settings whose rounds carry no worker store, so the agent's stack service stays idle. A
// worker failure waits connection_grace + verdict_margin for a loss verdict: 600 ms, well beyond
// the 120 ms in which fast_settings' heartbeats find a lost node.
inline rdzv::C10dSettings c10d_settings(int min_nodes, int max_nodes) {
  rdzv::C10dSettings s = rdzv::test::fast_settings(min_nodes, max_nodes);
  s.store_host = "";
  s.store_port = 0;
  s.connection_grace = 100ms;
  s.verdict_margin = 500ms;
  return s;
}

inline bool has_env(const WorkerSpec& spec, const std::string& entry) {
  return std::find(spec.env.begin(), spec.env.end(), entry) != spec.env.end();
}

// One node's agent on the static rendezvous (its own loopback store), with as many workers as
// the script's first attempt has and --max_restarts=1 unless `config` is changed before run().
// `replacements`: what the processes replace() starts do (--recovery=inprocess).
struct StaticRun {
  explicit StaticRun(std::vector<FakeAttempt> script, int max_restarts = 1,
                     std::vector<FakeOutcome> replacements = {})
      : launcher(script, std::move(replacements)),
        config(agent_config(logs, static_cast<int>(script.at(0).size()), max_restarts)) {}

  // Runs the agent until it returns; `once_started`, when given, runs once the first attempt's
  // workers are launched (to send the agent a signal, say).
  void run(const std::function<void()>& once_started = {}) {
    boost::asio::io_context io;
    rdzv::StaticRendezvous rendezvous(io, one_static_node(config.max_restarts));
    ElasticAgent agent(io, agent_spec(config, {}), rendezvous, events, launcher, handover);
    auto run = rdzv::test::spawn(io, agent.run());
    if (once_started) {
      REQUIRE(rdzv::test::run_until(io, [&] { return !launcher.launched.empty(); }));
      once_started();
    }
    REQUIRE(rdzv::test::run_until(io, [&] { return run->done; }));
    exit_code = run->get();
  }

  TempDir logs;
  RecordingEventSink events;
  FakeLauncher launcher;
  LaunchConfig config;
  WorkerHandover* handover = nullptr;  // --recovery=inprocess's channel, when a test sets one
  int exit_code = -1;
};

// Agents on nodes of one c10d Cluster, each with its own fake launcher and event sink.
struct C10dAgents {
  C10dAgents(rdzv::test::Cluster& cluster, const LaunchConfig& config,
             const std::vector<std::vector<FakeAttempt>>& scripts) {
    for (const auto& script : scripts) add(cluster, config, script);
  }
  // Adds an agent on a new node of `cluster`; start() or start_next() runs it.
  // `handover`, when given, is the agent's hand-over channel (--recovery=inprocess).
  void add(rdzv::test::Cluster& cluster, const LaunchConfig& config,
           const std::vector<FakeAttempt>& script, WorkerHandover* handover = nullptr) {
    events.push_back(std::make_unique<RecordingEventSink>());
    launchers.push_back(std::make_unique<FakeLauncher>(script));
    agents.push_back(std::make_unique<ElasticAgent>(cluster.io, agent_spec(config, {}),
                                                    cluster.add_node(), *events.back(),
                                                    *launchers.back(), handover));
  }
  void start(boost::asio::io_context& io) {
    while (runs.size() < agents.size()) start_next(io);
  }
  void start_next(boost::asio::io_context& io) {
    runs.push_back(rdzv::test::spawn(io, agents[runs.size()]->run()));
  }

  std::vector<std::unique_ptr<RecordingEventSink>> events;
  std::vector<std::unique_ptr<FakeLauncher>> launchers;
  std::vector<std::unique_ptr<ElasticAgent>> agents;
  std::vector<std::shared_ptr<rdzv::test::Outcome<int>>> runs;
};

}  // namespace ddp::agent::test
