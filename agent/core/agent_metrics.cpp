// Agent metrics from events. Worker states are per attempt: workers_started resets them and each
// worker_exited moves one worker out of "running". A worker the agent stopped (SIGTERM after
// another's failure, a restart, a signal) is "stopped", not "failed", so a dashboard shows the
// one root failure rather than the whole group.

#include "agent/core/agent_metrics.hpp"

#include "common/log.hpp"
#include "common/metrics/process_metrics.hpp"
#include "rendezvous/metrics/store_metrics.hpp"

namespace ddp::agent {
namespace {

// Rendezvous rounds take from milliseconds (one node) to the join timeout (minutes).
const std::vector<double> kRendezvousBuckets = {0.01, 0.05, 0.1, 0.25, 0.5, 1,   2.5,
                                                5,    10,   30,  60,   120, 300, 600};

const EventValue* field(const Event& event, std::string_view key) {
  for (const auto& [name, value] : event.fields) {
    if (name == key) return &value;
  }
  return nullptr;
}

std::int64_t int_field(const Event& event, std::string_view key, std::int64_t fallback = 0) {
  const EventValue* value = field(event, key);
  const auto* number = value != nullptr ? std::get_if<std::int64_t>(value) : nullptr;
  return number != nullptr ? *number : fallback;
}

std::string string_field(const Event& event, std::string_view key) {
  const EventValue* value = field(event, key);
  const auto* text = value != nullptr ? std::get_if<std::string>(value) : nullptr;
  return text != nullptr ? *text : std::string();
}

double seconds_between(std::chrono::steady_clock::time_point from,
                       std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

AgentMetrics::AgentMetrics(metrics::Registry& r, const MetricsSpec& spec)
    : world_size_(r.gauge("ddprun_world_size",
                          "Workers in the current round over all nodes "
                          "(WORLD_SIZE); 0 before the first round.")),
      nodes_(r.gauge("ddprun_nodes", "Nodes in the current round (GROUP_WORLD_SIZE).")),
      group_rank_(r.gauge("ddprun_group_rank", "This node's rank in the current round.")),
      restart_count_(r.gauge("ddprun_restarts_spent",
                             "Job-wide restarts spent so far (TORCHELASTIC_RESTART_COUNT).")),
      restarts_(r.counter("ddprun_restarts_total",
                          "Restarts of this node's workers, for any reason (a failure here or "
                          "on another node, a node lost or joining).")),
      rounds_(r.counter("ddprun_rendezvous_rounds_total", "Rendezvous rounds this node joined.")),
      rendezvous_seconds_(r.gauge("ddprun_rendezvous_seconds",
                                  "Seconds the last rendezvous round took this node.")),
      rendezvous_duration_(r.histogram("ddprun_rendezvous_duration_seconds",
                                       "Seconds each rendezvous round took this node.",
                                       kRendezvousBuckets)),
      running_(r.gauge("ddprun_workers", "This node's workers of the current attempt by state.",
                       {{"state", "running"}})),
      succeeded_(r.gauge("ddprun_workers", "", {{"state", "succeeded"}})),
      failed_(r.gauge("ddprun_workers", "", {{"state", "failed"}})),
      stopped_(r.gauge("ddprun_workers", "", {{"state", "stopped"}})),
      exits_by_code_(r.counter("ddprun_worker_exits_total",
                               "Worker exits on this node: exit (with any code), signal, oom "
                               "(SIGKILL while the cgroup's OOM kill count rose).",
                               {{"reason", "exit"}})),
      exits_by_signal_(r.counter("ddprun_worker_exits_total", "", {{"reason", "signal"}})),
      exits_by_oom_(r.counter("ddprun_worker_exits_total", "", {{"reason", "oom"}})),
      worker_failures_(r.counter("ddprun_worker_failures_total",
                                 "Workers on this node that failed (non-zero exit or a signal "
                                 "the agent did not send).")),
      node_losses_(r.counter("ddprun_node_losses_total",
                             "Other nodes this node saw lost (stopped heartbeating, closed "
                             "their store connection, or hosted a store that went away).")),
      reforms_(r.counter("ddprun_reforms_total",
                         "Round changes this node's live workers re-formed through "
                         "(--recovery=inprocess): no process started.",
                         {{"result", "reformed"}})),
      reform_failures_(r.counter("ddprun_reforms_total", "", {{"result", "failed"}})),
      reform_seconds_(r.gauge("ddprun_reform_seconds",
                              "Seconds from the last round change to every live worker of this "
                              "node re-formed in the next round.")) {
  r.gauge("ddprun_up", "1 while the agent runs.").set(1);
  r.gauge(
       "ddprun_info", "The job this agent belongs to (value 1).",
       {{"run_id", spec.run_id}, {"rdzv_backend", spec.rdzv_backend}, {"role", spec.role}})
      .set(1);
  r.gauge("ddprun_max_restarts", "--max_restarts.").set(spec.max_restarts);
  r.gauge("ddprun_local_world_size", "Workers this node starts per attempt (--nproc_per_node).")
      .set(spec.nproc_per_node);
}

void AgentMetrics::emit(const Event& event) {
  if (event.name == "rendezvous") {
    on_rendezvous(event);
  } else if (event.name == "workers_started") {
    on_workers_started(event);
  } else if (event.name == "worker_exited") {
    on_worker_exited(event);
  } else if (event.name == "worker_replaced") {
    running_.inc();  // a failed worker's new process (--recovery=inprocess)
  } else if (event.name == "restart") {
    on_restart(event);
  } else if (event.name == "node_lost") {
    node_losses_.inc();
    ++losses_this_round_;
  } else if (event.name == "reform") {
    reforms_.inc();
    reform_seconds_.set(static_cast<double>(int_field(event, "ms")) / 1000.0);
    losses_this_round_ = 0;
  } else if (event.name == "reform_failed") {
    reform_failures_.inc();
    losses_this_round_ = 0;
  }
}

void AgentMetrics::on_rendezvous(const Event& event) {
  rounds_.inc();
  world_size_.set(static_cast<double>(int_field(event, "world_size")));
  nodes_.set(static_cast<double>(int_field(event, "group_world_size")));
  group_rank_.set(static_cast<double>(int_field(event, "group_rank")));
  restart_count_.set(static_cast<double>(int_field(event, "restart_count")));
  const double seconds = seconds_between(round_started_, event.mono_time);
  rendezvous_seconds_.set(seconds);
  rendezvous_duration_.observe(seconds);
}

void AgentMetrics::on_workers_started(const Event& event) {
  const EventValue* pids = field(event, "pids");
  const auto* list = pids != nullptr ? std::get_if<std::vector<std::int64_t>>(pids) : nullptr;
  running_.set(list != nullptr ? static_cast<double>(list->size()) : 0);
  succeeded_.set(0);
  failed_.set(0);
  stopped_.set(0);
}

void AgentMetrics::on_worker_exited(const Event& event) {
  if (running_.value() > 0) running_.dec();
  const bool signalled = field(event, "signal") != nullptr;
  const bool by_agent = int_field(event, "stopped_by_agent") != 0;
  if (int_field(event, "oom_suspected") != 0) {
    exits_by_oom_.inc();
  } else if (signalled) {
    exits_by_signal_.inc();
  } else {
    exits_by_code_.inc();
  }
  if (by_agent) {
    stopped_.inc();
  } else if (signalled || int_field(event, "exit_code") != 0) {
    failed_.inc();
    worker_failures_.inc();
  } else {
    succeeded_.inc();
  }
}

void AgentMetrics::on_restart(const Event& event) {
  restarts_.inc();
  // A round ended by a lost node counts it, unless node_lost events named the nodes already.
  if (string_field(event, "round_change") == "node_lost" && losses_this_round_ == 0) {
    node_losses_.inc();
  }
  losses_this_round_ = 0;
  if (int_field(event, "restart_spent") != 0) {
    restart_count_.set(static_cast<double>(int_field(event, "restart_count")));
  }
  round_started_ = event.mono_time;
}

namespace {

metrics::HttpServerOptions server_options(const MetricsSpec& spec) {
  metrics::HttpServerOptions options;
  // Loopback unless --metrics_addr says otherwise: the job's figures (and its store's) are
  // nobody else's business on a shared network (docs/security.md).
  options.host = spec.addr.empty() ? "127.0.0.1" : spec.addr;
  options.port = static_cast<std::uint16_t>(spec.port);
  return options;
}

}  // namespace

MetricsEndpoint::MetricsEndpoint(boost::asio::io_context& io, const MetricsSpec& spec)
    : agent_(registry_, spec), server_(io, registry_, server_options(spec)) {
  rdzv::export_store_metrics(registry_);
  metrics::export_process_metrics(registry_);
  server_.start();
  log::get("agent")->info("metrics at http://{}/metrics", server_.address());
}

std::unique_ptr<MetricsEndpoint> make_metrics_endpoint(boost::asio::io_context& io,
                                                       const MetricsSpec& spec) {
  if (spec.port == 0) return nullptr;
  return std::make_unique<MetricsEndpoint>(io, spec);
}

}  // namespace ddp::agent
