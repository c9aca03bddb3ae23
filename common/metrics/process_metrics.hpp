#pragma once
// export_process_metrics: the standard process_* series every Prometheus exporter has (CPU time,
// resident memory, start time, open descriptors), read from /proc/self at each scrape.

#include "common/metrics/registry.hpp"

namespace ddp::metrics {

// Adds process_cpu_seconds_total, process_resident_memory_bytes,
// process_virtual_memory_bytes, process_start_time_seconds and process_open_fds.
void export_process_metrics(Registry& registry);

}  // namespace ddp::metrics
