// The store's figures in the exposition move with real client traffic on a TcpStoreServer.
// ServerStats is process-wide, so each check compares before and after.

#include "rendezvous/metrics/store_metrics.hpp"

#include <catch2/catch.hpp>

#include "common/metrics/registry.hpp"
#include "tests/unit/metrics/exposition_sample.hpp"
#include "tests/unit/rendezvous/store_server/raw_client.hpp"

using namespace ddp::rdzv;
using namespace ddp::rdzv::test;
using ddp::metrics::test::sample;

namespace {

// How much a sample grew from one exposition to a later one.
double grown(const std::string& before, const std::string& after, const std::string& name) {
  return sample(after, name) - sample(before, name);
}

}  // namespace

TEST_CASE("store counters move with client requests, bytes and connections", "[store_metrics]") {
  ddp::metrics::Registry registry;
  export_store_metrics(registry);
  const std::string before = registry.expose();
  {
    ServerThread server;
    RawClient client(server.port());
    client.send(cat({byte(0), str("/m/k"), str("value")}));               // 1.13 SET
    CHECK(client.call(cat({byte(2), str("/m/k")}), 13) == str("value"));  // GET
    // A WAIT on a missing key parks a waiter.
    RawClient waiter(server.port());
    waiter.send(cat({byte(5), u64le(1), str("/m/late")}));
    CHECK(waiter.is_silent_for(20));
    const std::string during = registry.expose();
    CHECK(grown(before, during, "ddp_store_requests_total{command=\"set\"}") == 1);
    CHECK(grown(before, during, "ddp_store_requests_total{command=\"get\"}") == 1);
    CHECK(sample(during, "ddp_store_connections") - sample(before, "ddp_store_connections") == 2);
    CHECK(sample(during, "ddp_store_keys") >= 1);
    CHECK(sample(during, "ddp_store_waiters") >= 1);
    // SET: 1 + (8+4) + (8+5); GET: 1 + (8+4); WAIT: 1 + 8 + (8+7).
    CHECK(sample(during, "ddp_store_received_bytes_total") -
              sample(before, "ddp_store_received_bytes_total") ==
          26 + 13 + 24);
    CHECK(sample(during, "ddp_store_sent_bytes_total") -
              sample(before, "ddp_store_sent_bytes_total") ==
          13);
  }
  const std::string after = registry.expose();
  CHECK(sample(after, "ddp_store_connections") == sample(before, "ddp_store_connections"));
  CHECK(sample(after, "ddp_store_connections_accepted_total") -
            sample(before, "ddp_store_connections_accepted_total") ==
        2);
  CHECK(sample(after, "ddp_store_keys") == sample(before, "ddp_store_keys"));
}

TEST_CASE("2.x queue requests are counted by command, queued values by a gauge",
          "[store_metrics]") {
  ddp::metrics::Registry registry;
  export_store_metrics(registry);
  const std::string before = registry.expose();
  ServerThread server;
  RawClient client(server.port());
  client.send(validate());
  client.send(cat({byte(14), str("/m/q"), str("a")}));  // QUEUE_PUSH x2
  client.send(cat({byte(14), str("/m/q"), str("b")}));
  CHECK(client.call(cat({byte(16), str("/m/q")}), 8) == u64le(2));  // QUEUE_LEN
  const std::string during = registry.expose();
  CHECK(grown(before, during, "ddp_store_requests_total{command=\"queue_push\"}") == 2);
  CHECK(grown(before, during, "ddp_store_requests_total{command=\"queue_len\"}") == 1);
  CHECK(grown(before, during, "ddp_store_queued_values") == 2);
  CHECK(client.call(cat({byte(15), str("/m/q")}), 17) == cat({u64le(2), str("a")}));
  CHECK(grown(before, registry.expose(), "ddp_store_queued_values") == 1);
}

TEST_CASE("bad store input is counted", "[store_metrics]") {
  ddp::metrics::Registry registry;
  export_store_metrics(registry);
  const double before = sample(registry.expose(), "ddp_store_bad_requests_total");
  ServerThread server;
  RawClient bad(server.port());
  bad.send(hex("FF"));
  CHECK(bad.is_closed_by_server());
  CHECK(sample(registry.expose(), "ddp_store_bad_requests_total") - before == 1);
}
