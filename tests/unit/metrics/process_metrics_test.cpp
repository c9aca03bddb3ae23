// process_* series read from /proc/self: plausible values for this test process.

#include "common/metrics/process_metrics.hpp"

#include <catch2/catch.hpp>
#include <chrono>

#include "tests/unit/metrics/exposition_sample.hpp"

using ddp::metrics::test::sample;

TEST_CASE("process metrics describe this process", "[metrics]") {
  ddp::metrics::Registry registry;
  ddp::metrics::export_process_metrics(registry);
  const std::string text = registry.expose();
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  CHECK(sample(text, "process_resident_memory_bytes") > 1e6);
  CHECK(sample(text, "process_virtual_memory_bytes") >=
        sample(text, "process_resident_memory_bytes"));
  CHECK(sample(text, "process_open_fds") >= 3);  // at least stdin, stdout, stderr
  CHECK(sample(text, "process_cpu_seconds_total") >= 0);
  const double start = sample(text, "process_start_time_seconds");
  CHECK(start <= now + 1);
  CHECK(start > now - 3600);
  CHECK(text.find("# TYPE process_cpu_seconds_total counter") != std::string::npos);
}
