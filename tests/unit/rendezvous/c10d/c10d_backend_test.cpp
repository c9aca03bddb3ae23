// C10dBackend on loopback: the hosting decision (the first agent to bind hosts, the next one is a
// client, is_host=1 on a taken port fails) and a round through the real server and client.

#include <catch2/catch.hpp>

#include <boost/asio/ip/tcp.hpp>

#include "c10d_test_util.hpp"
#include "ddp/error.hpp"
#include "rendezvous/c10d/c10d_backend.hpp"

using namespace ddp::rdzv;
using namespace ddp::rdzv::test;

namespace {

std::uint16_t unused_port() {
  asio::io_context io;
  asio::ip::tcp::acceptor probe(io, {asio::ip::make_address("127.0.0.1"), 0});
  return probe.local_endpoint().port();
}

C10dOptions loopback_options(std::uint16_t port) {
  C10dOptions options;
  options.settings = fast_settings(2, 2);
  options.settings.run_id = "backend";
  options.endpoint_host = "127.0.0.1";
  options.endpoint_port = port;
  options.read_timeout = 5s;
  return options;
}

}  // namespace

TEST_CASE("the first agent on a machine hosts the store and the next one joins it", "[c10d][tcp]") {
  asio::io_context io;
  const std::uint16_t port = unused_port();
  auto host = make_c10d_rendezvous(loopback_options(port), io);
  auto client = make_c10d_rendezvous(loopback_options(port), io);
  auto a = spawn(io, client->next_round(2));
  auto b = spawn(io, host->next_round(1));
  REQUIRE(run_until(io, [&] { return a->done && b->done; }));
  const RendezvousInfo on_host = b->get();
  const RendezvousInfo on_client = a->get();
  CHECK(on_host.group_rank == 0);  // the store host, although it joined second
  CHECK(on_client.group_rank == 1);
  CHECK(on_client.rank_base == 1);
  CHECK(on_client.world_size == 3);
  CHECK(on_client.master_addr == "127.0.0.1");
  CHECK(on_client.master_port == on_host.master_port);
  CHECK(on_client.master_port != port);  // a fresh worker store, not the rendezvous store

  SECTION("is_host=1 on a port another agent holds is an error naming the address") {
    C10dOptions forced = loopback_options(port);
    forced.is_host = true;
    CHECK_THROWS_AS(make_c10d_rendezvous(forced, io), ddp::IoError);
  }
  SECTION("both pass the exit barrier") {
    auto fa = spawn(io, client->finish(true));
    auto fb = spawn(io, host->finish(true));
    REQUIRE(run_until(io, [&] { return fa->done && fb->done; }));
    CHECK_FALSE(fa->error);
    CHECK_FALSE(fb->error);
  }
}

TEST_CASE("a client whose endpoint never answers times out naming the store", "[c10d][tcp]") {
  asio::io_context io;
  C10dOptions options = loopback_options(unused_port());
  options.is_host = false;
  options.settings.join_timeout = 300ms;
  auto node = make_c10d_rendezvous(options, io);
  auto out = spawn(io, node->next_round(1));
  REQUIRE(run_until(io, [&] { return out->done; }));
  REQUIRE(out->error);
  CHECK_THAT(out->error_text(), Catch::Contains("127.0.0.1"));
}
