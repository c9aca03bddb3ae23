// Store metrics are read from ServerStats' atomics at scrape time, so the servers pay one relaxed
// add per event and nothing per scrape. Open connections are accepted minus closed: a connection
// is counted closed once, by ServerConnection::close().

#include "rendezvous/metrics/store_metrics.hpp"

#include "rendezvous/store_server/server_stats.hpp"

#include <atomic>
#include <utility>

namespace ddp::rdzv {
namespace {

double load(const std::atomic<std::uint64_t>& counter) {
  return static_cast<double>(counter.load(std::memory_order_relaxed));
}

}  // namespace

void export_store_metrics(metrics::Registry& registry) {
  ServerStats& stats = server_stats();
  registry.gauge_fn("ddp_store_connections", "Store client connections open now.", {}, [&stats] {
    return load(stats.connections_accepted) - load(stats.connections_closed);
  });
  registry.counter_fn("ddp_store_connections_accepted_total", "Store client connections accepted.",
                      {}, [&stats] { return load(stats.connections_accepted); });
  registry.counter_fn("ddp_store_connections_refused_total",
                      "Store client connections closed at once because the server was full.", {},
                      [&stats] { return load(stats.connections_refused); });
  registry.counter_fn("ddp_store_authenticated_total",
                      "Store connections that proved the job secret (docs/security.md).", {},
                      [&stats] { return load(stats.connections_authenticated); });
  const std::pair<const char*, const std::atomic<std::uint64_t>*> refusals[] = {
      {"not_member", &stats.refused_not_member},
      {"bad_handshake", &stats.handshakes_refused},
      {"unauthenticated", &stats.requests_unauthenticated},
      {"handshake_timeout", &stats.handshakes_timed_out}};
  for (const auto& [reason, counter] : refusals) {
    registry.counter_fn("ddp_store_refused_total",
                        "Store connections refused by the store's guard, by reason.",
                        {{"reason", reason}}, [counter] { return load(*counter); });
  }
  for (std::size_t i = 0; i < kCommandCount; ++i) {
    const auto command = static_cast<wire::Command>(i);
    registry.counter_fn("ddp_store_requests_total", "Store requests served, by command.",
                        {{"command", command_label(command)}},
                        [&stats, i] { return load(stats.requests[i]); });
  }
  registry.counter_fn("ddp_store_bad_requests_total",
                      "Store requests refused as bad input (each closed its connection).", {},
                      [&stats] { return load(stats.bad_requests); });
  registry.counter_fn("ddp_store_received_bytes_total", "Bytes read from store clients.", {},
                      [&stats] { return load(stats.bytes_received); });
  registry.counter_fn("ddp_store_sent_bytes_total", "Bytes written to store clients.", {},
                      [&stats] { return load(stats.bytes_sent); });
  registry.gauge_fn("ddp_store_keys", "Keys held by the store now.", {},
                    [&stats] { return static_cast<double>(stats.key_count()); });
  registry.gauge_fn("ddp_store_waiters",
                    "Parked WAIT and BARRIER requests (clients' and in-process) on the store now.",
                    {}, [&stats] { return static_cast<double>(stats.waiter_count()); });
  registry.gauge_fn("ddp_store_queued_values", "Values held in the store's 2.x queues now.", {},
                    [&stats] { return static_cast<double>(stats.queued_value_count()); });
}

}  // namespace ddp::rdzv
