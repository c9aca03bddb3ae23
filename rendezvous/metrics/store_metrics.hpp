#pragma once
// export_store_metrics: registers this process's store servers' figures (ServerStats) in a
// Registry under the ddp_store_ prefix. Read at each scrape, on the servers' thread. The names
// and their meaning: docs/metrics.md.

#include "common/metrics/registry.hpp"

namespace ddp::rdzv {

// Adds ddp_store_connections, ddp_store_connections_accepted_total,
// ddp_store_connections_refused_total, ddp_store_authenticated_total,
// ddp_store_refused_total{reason}, ddp_store_requests_total{command},
// ddp_store_bad_requests_total, ddp_store_received_bytes_total, ddp_store_sent_bytes_total,
// ddp_store_keys and ddp_store_waiters. Zero in a process that hosts no store.
void export_store_metrics(metrics::Registry& registry);

}  // namespace ddp::rdzv
