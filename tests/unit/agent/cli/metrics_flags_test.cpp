// --metrics_port and --metrics_addr: both spellings, PET_ fallbacks, the range, off by default.

#include <catch2/catch.hpp>

#include "ddp/error.hpp"
#include "tests/unit/agent/cli/cli_test_util.hpp"

namespace ddp::agent {
namespace {

using test::parse;

TEST_CASE("issue 19: metrics are off by default and on with --metrics_port", "[cli]") {
  const auto off = parse({"s"});
  CHECK(off.metrics_port == 0);
  CHECK(off.metrics_addr.empty());
  const auto on = parse({"--metrics_port", "9400", "--metrics-addr=127.0.0.1", "s"});
  CHECK(on.metrics_port == 9400);
  CHECK(on.metrics_addr == "127.0.0.1");
  CHECK(parse({"--metrics-port=9401", "s"}).metrics_port == 9401);
}

TEST_CASE("issue 19: PET_METRICS_PORT and PET_METRICS_ADDR fill the flags", "[cli][env]") {
  const auto config = parse({"s"}, {{"PET_METRICS_PORT", "9402"}, {"PET_METRICS_ADDR", "::1"}});
  CHECK(config.metrics_port == 9402);
  CHECK(config.metrics_addr == "::1");
  CHECK(config.source_of("metrics_port") == ValueSource::kEnv);
  CHECK(parse({"--metrics_port=1", "s"}, {{"PET_METRICS_PORT", "9402"}}).metrics_port == 1);
}

TEST_CASE("issue 19: a bad metrics port names its flag or variable", "[cli]") {
  CHECK_THROWS_WITH(parse({"--metrics_port=70000", "s"}),
                    Catch::StartsWith("--metrics_port: must be between 0 and 65535"));
  CHECK_THROWS_WITH(parse({"--metrics_port=x", "s"}),
                    Catch::StartsWith("--metrics_port: expected an integer"));
  CHECK_THROWS_WITH(parse({"s"}, {{"PET_METRICS_PORT", "-1"}}),
                    Catch::StartsWith("PET_METRICS_PORT"));
}

}  // namespace
}  // namespace ddp::agent
