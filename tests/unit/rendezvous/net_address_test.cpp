// The advertised address and the "is this endpoint me" test, on this machine's loopback.

#include <catch2/catch.hpp>

#include "ddp/error.hpp"
#include "rendezvous/net_address.hpp"

using namespace ddp::rdzv;

TEST_CASE("the route to a loopback endpoint is the loopback address", "[net]") {
  CHECK(route_address("127.0.0.1", 29400) == "127.0.0.1");
  const std::string via_name = route_address("localhost", 29400);
  CHECK((via_name.rfind("127.", 0) == 0 || via_name == "::1"));
}

TEST_CASE("loopback names and literals are this host but other addresses are not", "[net]") {
  CHECK(is_local_host("localhost"));
  CHECK(is_local_host("127.0.0.1"));
  CHECK(is_local_host("127.0.0.5"));
  CHECK_FALSE(is_local_host("192.0.2.123"));  // TEST-NET-1: never assigned here
  CHECK_FALSE(is_local_host("no-such-host.invalid"));
}

TEST_CASE("an endpoint that cannot be resolved is an error naming it", "[net]") {
  CHECK_THROWS_WITH(route_address("no-such-host.invalid", 1),
                    Catch::Contains("no-such-host.invalid"));
}

TEST_CASE("IPv6 endpoints route and resolve without brackets", "[net]") {
  CHECK(route_address("::1", 29400) == "::1");
  CHECK(is_local_host("::1"));
}
