// AgentMetrics turns the agent's events into the ddprun_ series: rounds, worker states per
// attempt, exits by reason, restarts and node losses.

#include "agent/core/agent_metrics.hpp"

#include <catch2/catch.hpp>
#include <string>

#include "common/metrics/registry.hpp"
#include "tests/unit/metrics/exposition_sample.hpp"

namespace ddp::agent {
namespace {

using metrics::test::sample;

Event exited(int rank, int exit_code, bool by_agent = false) {
  return Event("worker_exited")
      .with("rank", rank)
      .with("exit_code", exit_code)
      .with("stopped_by_agent", by_agent ? 1 : 0);
}

Event killed(int rank, bool by_agent, bool oom = false) {
  Event event("worker_exited");
  event.with("rank", rank).with("signal", std::string("SIGKILL"));
  event.with("stopped_by_agent", by_agent ? 1 : 0);
  if (oom) event.with("oom_suspected", 1);
  return event;
}

TEST_CASE("agent metrics follow rounds, workers, exits and restarts", "[agent_metrics]") {
  metrics::Registry registry;
  MetricsSpec spec;
  spec.nproc_per_node = 2;
  spec.max_restarts = 3;
  AgentMetrics agent(registry, spec);
  auto value = [&registry](const std::string& series) { return sample(registry.expose(), series); };
  CHECK(value("ddprun_up") == 1);
  CHECK(value("ddprun_world_size") == 0);

  agent.emit(Event("rendezvous")
                 .with("round", 0)
                 .with("group_rank", 1)
                 .with("group_world_size", 2)
                 .with("world_size", 4)
                 .with("restart_count", 0));
  agent.emit(Event("workers_started").with("pids", std::vector<std::int64_t>{10, 11}));
  CHECK(value("ddprun_world_size") == 4);
  CHECK(value("ddprun_nodes") == 2);
  CHECK(value("ddprun_rendezvous_rounds_total") == 1);
  CHECK(value("ddprun_rendezvous_duration_seconds_count") == 1);
  CHECK(value("ddprun_workers{state=\"running\"}") == 2);

  // Rank 2 fails; the agent stops rank 3; the restart is spent.
  agent.emit(exited(2, 1));
  agent.emit(killed(3, /*by_agent=*/true));
  agent.emit(Event("restart").with("restart_spent", 1).with("restart_count", 1));
  CHECK(value("ddprun_workers{state=\"running\"}") == 0);
  CHECK(value("ddprun_workers{state=\"failed\"}") == 1);
  CHECK(value("ddprun_workers{state=\"stopped\"}") == 1);
  CHECK(value("ddprun_worker_exits_total{reason=\"exit\"}") == 1);
  CHECK(value("ddprun_worker_exits_total{reason=\"signal\"}") == 1);
  CHECK(value("ddprun_worker_failures_total") == 1);
  CHECK(value("ddprun_restarts_total") == 1);
  CHECK(value("ddprun_restarts_spent") == 1);

  // The next attempt: a node is lost, then the one after it succeeds; one worker was OOM-killed.
  agent.emit(Event("rendezvous").with("world_size", 2).with("group_world_size", 1));
  agent.emit(Event("workers_started").with("pids", std::vector<std::int64_t>{12, 13}));
  CHECK(value("ddprun_workers{state=\"failed\"}") == 0);
  agent.emit(killed(2, /*by_agent=*/false, /*oom=*/true));
  agent.emit(
      Event("restart").with("restart_spent", 0).with("round_change", std::string("node_lost")));
  CHECK(value("ddprun_worker_exits_total{reason=\"oom\"}") == 1);
  CHECK(value("ddprun_node_losses_total") == 1);
  CHECK(value("ddprun_restarts_total") == 2);
  agent.emit(Event("rendezvous").with("world_size", 2).with("group_world_size", 1));
  agent.emit(Event("workers_started").with("pids", std::vector<std::int64_t>{14, 15}));
  agent.emit(exited(0, 0));
  agent.emit(exited(1, 0));
  CHECK(value("ddprun_workers{state=\"succeeded\"}") == 2);
  CHECK(value("ddprun_workers{state=\"running\"}") == 0);
  CHECK(value("ddprun_rendezvous_rounds_total") == 3);
  CHECK(value("ddprun_world_size") == 2);

  // Two nodes named lost by node_lost events, then the restart they cause: two losses, not three.
  agent.emit(Event("node_lost").with("node", std::string("10.0.0.2_7")));
  agent.emit(Event("node_lost").with("node", std::string("10.0.0.3_8")));
  agent.emit(
      Event("restart").with("restart_spent", 0).with("round_change", std::string("node_lost")));
  CHECK(value("ddprun_node_losses_total") == 3);
}

TEST_CASE("agent metrics count in-process re-forms and their failures", "[agent_metrics]") {
  metrics::Registry registry;
  const MetricsSpec spec;
  AgentMetrics agent(registry, spec);
  auto value = [&registry](const std::string& series) { return sample(registry.expose(), series); };
  agent.emit(Event("node_lost").with("node", std::string("n2")));
  agent.emit(Event("reform").with("round", 1).with("ms", 250));
  agent.emit(Event("reform_failed").with("round", 2));
  CHECK(value("ddprun_reforms_total{result=\"reformed\"}") == 1);
  CHECK(value("ddprun_reforms_total{result=\"failed\"}") == 1);
  CHECK(value("ddprun_reform_seconds") == Approx(0.25));
  CHECK(value("ddprun_node_losses_total") == 1);
  CHECK(value("ddprun_restarts_total") == 0);  // no process was started again for the loss
}

TEST_CASE("agent metrics: a failed worker started again alone runs again, for one restart",
          "[agent_metrics]") {
  metrics::Registry registry;
  const MetricsSpec spec;
  AgentMetrics agent(registry, spec);
  auto value = [&registry](const std::string& series) { return sample(registry.expose(), series); };
  agent.emit(Event("workers_started").with("pids", std::vector<std::int64_t>{10, 11}));
  agent.emit(exited(1, 3));
  agent.emit(Event("restart").with("restart_spent", 1).with("restart_count", 1));
  agent.emit(Event("worker_replaced").with("local_rank", 1).with("pid", 12));
  agent.emit(Event("reform").with("round", 1).with("ms", 900));
  CHECK(value("ddprun_workers{state=\"running\"}") == 2);
  CHECK(value("ddprun_workers{state=\"failed\"}") == 1);
  CHECK(value("ddprun_worker_failures_total") == 1);
  CHECK(value("ddprun_restarts_total") == 1);
  CHECK(value("ddprun_restarts_spent") == 1);
  CHECK(value("ddprun_reforms_total{result=\"reformed\"}") == 1);
}

}  // namespace
}  // namespace ddp::agent
