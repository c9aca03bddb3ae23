#pragma once
// export_store_metrics: registers this process's store servers' figures (ServerStats) in a
// Registry under the ddp_store_ prefix (zero in a process that hosts no store). Read at each
// scrape, on the servers' thread. The names and their meaning: docs/metrics.md.

#include "common/metrics/registry.hpp"

namespace ddp::rdzv {

void export_store_metrics(metrics::Registry& registry);

}  // namespace ddp::rdzv
