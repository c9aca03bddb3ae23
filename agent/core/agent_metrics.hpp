#pragma once
// The agent's Prometheus metrics (--metrics_port). AgentMetrics keeps the ddprun_ series up to
// date from the events the agent already emits (an EventSink beside the event log);
// MetricsEndpoint adds the figures of the store this process hosts and serves both over HTTP on
// the agent's loop. Agent thread only. Every metric: docs/metrics.md.

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "agent/core/event_log.hpp"
#include "common/metrics/http_server.hpp"
#include "common/metrics/registry.hpp"

namespace ddp::agent {

// What the metrics need from the command line (cli/agent_options.hpp fills it).
struct MetricsSpec {
  std::string run_id;        // --rdzv_id
  std::string rdzv_backend;  // --rdzv_backend
  std::string role;          // --role
  int max_restarts = 0;      // --max_restarts
  int nproc_per_node = 1;    // --nproc_per_node
  std::string addr;          // --metrics_addr; empty: 127.0.0.1
  int port = 0;              // --metrics_port; 0: off
};

class AgentMetrics final : public EventSink {
 public:
  // Registers the ddprun_ families in `registry`, which must outlive this.
  AgentMetrics(metrics::Registry& registry, const MetricsSpec& spec);
  void emit(const Event& event) override;

 private:
  void on_rendezvous(const Event& event);
  void on_workers_started(const Event& event);
  void on_worker_exited(const Event& event);
  void on_restart(const Event& event);

  metrics::Gauge& world_size_;
  metrics::Gauge& nodes_;
  metrics::Gauge& group_rank_;
  metrics::Gauge& restart_count_;
  metrics::Counter& restarts_;
  metrics::Counter& rounds_;
  metrics::Gauge& rendezvous_seconds_;
  metrics::Histogram& rendezvous_duration_;
  metrics::Gauge& running_;
  metrics::Gauge& succeeded_;
  metrics::Gauge& failed_;
  metrics::Gauge& stopped_;
  metrics::Counter& exits_by_code_;
  metrics::Counter& exits_by_signal_;
  metrics::Counter& exits_by_oom_;
  metrics::Counter& worker_failures_;
  metrics::Counter& node_losses_;
  metrics::Counter& reforms_;          // --recovery=inprocess: workers that kept running
  metrics::Counter& reform_failures_;  // ... and hand-overs that ended in a start
  metrics::Gauge& reform_seconds_;
  int losses_this_round_ = 0;  // node_lost events since the last restart
  // When the agent began joining the current round: its start, then each restart.
  std::chrono::steady_clock::time_point round_started_ = std::chrono::steady_clock::now();
};

class MetricsEndpoint {
 public:
  // Binds --metrics_addr:--metrics_port now (throws IoError naming --metrics_port when it
  // cannot) and serves /metrics once the io_context runs.
  MetricsEndpoint(boost::asio::io_context& io, const MetricsSpec& spec);
  EventSink& events() { return agent_; }
  std::uint16_t port() const { return server_.port(); }

 private:
  metrics::Registry registry_;
  AgentMetrics agent_;
  metrics::MetricsServer server_;
};

// The endpoint --metrics_port asks for; nullptr when it is 0 (off).
std::unique_ptr<MetricsEndpoint> make_metrics_endpoint(boost::asio::io_context& io,
                                                       const MetricsSpec& spec);

}  // namespace ddp::agent
