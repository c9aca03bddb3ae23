// Store leases: the lease document, KeyLeases over a MemoryStore's table (a dropped wait is a
// closed connection) and over a real TcpStoreServer with LeaseHolder clients; a holder's answers
// to the roll calls rung on its hold key.

#include <catch2/catch.hpp>

#include "rendezvous/store/key_table.hpp"
#include "rendezvous/store/store_lease.hpp"
#include "rendezvous/store/store_roll_call.hpp"
#include "rendezvous/store_client/lease_holder.hpp"
#include "rendezvous/store_client/tcp_store_client.hpp"
#include "rendezvous/store_server/tcp_store_server.hpp"
#include "tests/unit/rendezvous/c10d/c10d_test_util.hpp"

using namespace ddp::rdzv;
using namespace ddp::rdzv::test;

namespace {

Lease lease_to(const std::string& key, std::chrono::milliseconds grace) {
  return Lease{grace, key, "lost n1 after_ms={after_ms}\n"};
}

std::string value_of(KeyTable& table, const std::string& key) {
  const Bytes* value = table.find(key);
  return value ? to_string(*value) : std::string("<missing>");
}

}  // namespace

TEST_CASE("a lease document round-trips and bad ones are refused", "[lease]") {
  const Lease lease = lease_to("/log", 250ms);
  const auto back = decode_lease(encode(lease));
  REQUIRE(back.has_value());
  CHECK(back->grace == 250ms);
  CHECK(back->append_key == "/log");
  CHECK(to_string(expired_value(*back, 301ms)) == "lost n1 after_ms=301\n");
  CHECK_FALSE(decode_lease(to_bytes("garbage")).has_value());
  CHECK_FALSE(decode_lease(to_bytes(R"({"version":1,"grace_ms":-1,"append":"k","value":""})")));
  CHECK_FALSE(decode_lease(to_bytes(R"({"version":2,"grace_ms":1,"append":"k","value":""})")));
  CHECK(lease_base_of(lease_hold_key("/a/b")) == std::optional<std::string>("/a/b"));
  CHECK_FALSE(lease_base_of("/a/b/lease").has_value());
  CHECK_FALSE(lease_base_of(std::string(kLeaseHoldSuffix)).has_value());
}

TEST_CASE("a dropped hold wait expires its lease after the grace, once", "[lease]") {
  asio::io_context io;
  MemoryStore store(io.get_executor());
  KeyTable& table = store.table();
  table.set(lease_key("/n1"), encode(lease_to("/log", 30ms)));
  const auto id = table.wait({lease_hold_key("/n1")}, [] {});
  REQUIRE(id.has_value());
  table.cancel_wait(*id);  // what closing the holder's connection does
  CHECK_FALSE(table.contains("/log"));  // not before the grace
  REQUIRE(run_until(io, [&] { return table.contains("/log"); }, 2s));
  const std::string line = value_of(table, "/log");
  CHECK(line.starts_with("lost n1 after_ms="));
  CHECK(std::stoi(line.substr(17)) >= 30);
  CHECK_FALSE(table.contains(lease_key("/n1")));  // fires once
}

TEST_CASE("a hold wait parked again within the grace keeps the lease", "[lease]") {
  asio::io_context io;
  MemoryStore store(io.get_executor());
  KeyTable& table = store.table();
  table.set(lease_key("/n1"), encode(lease_to("/log", 30ms)));
  const auto first = table.wait({lease_hold_key("/n1")}, [] {});
  table.cancel_wait(*first);
  const auto second = table.wait({lease_hold_key("/n1")}, [] {});  // the holder reconnected
  REQUIRE(second.has_value());
  // Past the grace: the timer ran and found the new wait.
  run_for(io, 100ms);
  CHECK_FALSE(table.contains("/log"));
  CHECK(table.contains(lease_key("/n1")));
}

TEST_CASE("waits on other keys and holders without a lease document change nothing", "[lease]") {
  asio::io_context io;
  MemoryStore store(io.get_executor());
  KeyTable& table = store.table();
  const auto plain = table.wait({"/n1/lease"}, [] {});
  table.cancel_wait(*plain);
  const auto bare = table.wait({lease_hold_key("/n2")}, [] {});
  table.cancel_wait(*bare);
  table.set(lease_key("/n3"), to_bytes("not json"));
  const auto bad = table.wait({lease_hold_key("/n3")}, [] {});
  table.cancel_wait(*bad);
  run_for(io, 50ms);
  CHECK(table.size() == 1);  // only /n3's document
}

TEST_CASE("a lease holder's closed connection expires its lease on a real server",
          "[lease][tcp]") {
  asio::io_context io;
  TcpStoreServer server(io, "127.0.0.1", 0);
  server.start();
  KeyTable& table = server.store().table();
  table.set(lease_key("/alive"), encode(lease_to("/log_alive", 40ms)));
  table.set(lease_key("/dies"), encode(lease_to("/log_dies", 40ms)));
  auto alive_client = connect_client(io, server.port());
  auto dying_client = connect_client(io, server.port());
  // The living holder re-parks every 20 ms: each re-park drops a wait for a round trip, which
  // the grace must absorb.
  LeaseHolder alive(io.get_executor(), *alive_client, "/alive", 20ms);
  auto dying = std::make_unique<LeaseHolder>(io.get_executor(), *dying_client, "/dies");
  REQUIRE(run_until(io, [&] {
    return table.has_waiters(lease_hold_key("/alive")) &&
           table.has_waiters(lease_hold_key("/dies"));
  }));
  dying->stop();
  dying_client.reset();  // the process died: its socket closes
  REQUIRE(run_until(io, [&] { return table.contains("/log_dies"); }, 5s));
  CHECK(value_of(table, "/log_dies").starts_with("lost n1 after_ms="));
  // Several of the living holder's re-parks later, its lease stands.
  run_for(io, 200ms);
  CHECK_FALSE(table.contains("/log_alive"));
  CHECK(table.contains(lease_key("/alive")));
}

TEST_CASE("a lease holder answers each roll call generation rung on its hold key once",
          "[lease][roll]") {
  asio::io_context io;
  MemoryStore store(io.get_executor());
  KeyTable& table = store.table();
  table.set(lease_key("/n1"), encode(lease_to("/log", 30ms)));
  LeaseHolder holder(io.get_executor(), store, "/n1", 50ms);  // re-parked within the grace
  const std::string hold = lease_hold_key("/n1");
  REQUIRE(run_until(io, [&] { return table.has_waiters(hold); }, 2s));
  // The bell is answered, deleted, and the wait parked again.
  const auto rung_and_parked_again = [&] {
    return !table.contains(hold) && table.has_waiters(hold);
  };

  table.set("/call", roll_call_value(1, "a"));
  table.set(hold, to_bytes("/call"));
  REQUIRE(run_until(io, [&] { return value_of(table, "/call/1") == "1"; }, 2s));
  REQUIRE(run_until(io, rung_and_parked_again, 2s));

  // Rung again for the generation it answered: no second answer.
  table.set(hold, to_bytes("/call"));
  REQUIRE(run_until(io, rung_and_parked_again, 2s));
  run_for(io, 50ms);
  CHECK(value_of(table, "/call/1") == "1");

  // A newer generation: answered there.
  table.set("/call", roll_call_value(2, "b"));
  table.set(hold, to_bytes("/call"));
  REQUIRE(run_until(io, [&] { return value_of(table, "/call/2") == "1"; }, 2s));
  REQUIRE(run_until(io, rung_and_parked_again, 2s));

  // Answering is no drop: the lease never expired.
  run_for(io, 100ms);
  CHECK_FALSE(table.contains("/log"));
  CHECK(table.contains(lease_key("/n1")));
  holder.stop();
  run_for(io, 100ms);  // its last wait ends before the store goes
}

TEST_CASE("roll call values name their generation", "[lease][roll]") {
  CHECK(roll_call_generation(roll_call_value(7, "node-a")) == 7);
  CHECK(roll_call_generation(Bytes{}) == 0);
  CHECK(roll_call_generation(to_bytes("garbage")) == 0);
  CHECK(roll_call_answers_key("/r0/roll", 3) == "/r0/roll/3");
}
