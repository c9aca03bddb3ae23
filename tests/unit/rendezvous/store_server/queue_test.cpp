// The 2.x dialect's newest commands at the wire level (bytes in, bytes out, no sockets):
// QUEUE_PUSH/POP/LEN, LIST_KEYS and BARRIER, and how queues count for CHECK and WAIT.

#include "ddp/error.hpp"
#include "tests/unit/rendezvous/store_server/session_peer.hpp"

using namespace ddp::rdzv;
using namespace ddp::rdzv::test;

namespace {

// 2.x numbering.
ByteVec push(const std::string& key, const std::string& value) {
  return cat({byte(14), str(key), str(value)});
}
ByteVec pop(const std::string& key) { return cat({byte(15), str(key)}); }
ByteVec len(const std::string& key) { return cat({byte(16), str(key)}); }
ByteVec list_keys() { return byte(17); }
ByteVec barrier(const std::string& key, std::uint64_t world_size) {
  return cat({byte(18), str(key), u64le(world_size)});
}
ByteVec check(const std::string& key) { return cat({byte(5), u64le(1), str(key)}); }
ByteVec wait(std::initializer_list<std::string> keys) {
  ByteVec out = cat({byte(6), u64le(keys.size())});
  for (const auto& key : keys) out = cat({out, str(key)});
  return out;
}
const ByteVec kCancelWait = byte(12);
const ByteVec kStopWaiting = hex("00");

// A peer that has sent VALIDATE.
struct Peer2 : Peer {
  explicit Peer2(KeyTable& table, wire::Limits limits = {.max_keys_per_query = 16})
      : Peer(table, limits) {
    REQUIRE(send(validate()).empty());
  }
};

}  // namespace

TEST_CASE("2.x queues: push, pop and length in FIFO order, apart from the keys", "[queue]") {
  KeyTable table;
  Peer2 peer(table);
  CHECK(peer.send(push("/q", "first")).empty());
  CHECK(peer.send(push("/q", "second")).empty());
  CHECK(table.queued_value_count() == 2);
  CHECK(peer.send(len("/q")) == u64le(2));
  // QUEUE_POP answers the length before the pop, then the value.
  CHECK(peer.send(pop("/q")) == cat({u64le(2), str("first")}));
  CHECK(peer.send(len("/q")) == u64le(1));
  CHECK(peer.send(pop("/q")) == cat({u64le(1), str("second")}));
  // Empty (and unknown) queues: 0 and nothing more; the next reply is not shifted.
  CHECK(peer.send(cat({pop("/q"), len("/q")})) == cat({u64le(0), u64le(0)}));
  CHECK(peer.send(pop("/never")) == u64le(0));
  CHECK(peer.send(len("/never")) == u64le(0));
  CHECK(table.queued_value_count() == 0);
  // A queue and a key of the same name are independent; GETNUMKEYS counts keys only.
  peer.send(push("/q", "queued"));
  peer.send(cat({byte(1), str("/q"), str("set")}));
  CHECK(peer.send(byte(7)) == u64le(1));
  CHECK(peer.send(cat({byte(3), str("/q")})) == str("set"));
  CHECK(peer.send(cat({byte(8), str("/q")})) == u64le(1));
  CHECK(peer.send(pop("/q")) == cat({u64le(1), str("queued")}));
}

TEST_CASE("a push wakes one WAIT on an empty queue, and a second waiter stays waiting",
          "[queue]") {
  KeyTable table;
  Peer2 first(table);
  Peer2 second(table);
  Peer2 pusher(table);
  // A blocking queue_pop is WAIT, then QUEUE_POP.
  CHECK(first.send(wait({"/q"})).empty());
  CHECK(second.send(wait({"/q"})).empty());
  CHECK(table.waiter_count() == 2);
  pusher.send(push("/q", "job"));
  CHECK(first.take_later() == kStopWaiting);
  CHECK(second.take_later().empty());
  CHECK(table.waiter_count() == 1);
  CHECK(first.send(pop("/q")) == cat({u64le(1), str("job")}));
  pusher.send(push("/q", "job2"));
  CHECK(second.take_later() == kStopWaiting);
  CHECK(second.send(pop("/q")) == cat({u64le(1), str("job2")}));
  CHECK(table.waiter_count() == 0);
}

TEST_CASE("a push wakes the first waiter for which the queue was the last missing key", "[queue]") {
  KeyTable table;
  Peer2 both(table);
  Peer2 queue_only(table);
  Peer2 writer(table);
  CHECK(both.send(wait({"/q", "/k"})).empty());
  CHECK(queue_only.send(wait({"/q"})).empty());
  writer.send(push("/q", "x"));
  // `both` still misses /k: the push passes it (counting /q as present) and wakes the next.
  CHECK(both.take_later().empty());
  CHECK(queue_only.take_later() == kStopWaiting);
  writer.send(cat({byte(1), str("/k"), str("v")}));
  CHECK(both.take_later() == kStopWaiting);
  CHECK(table.waiter_count() == 0);
}

TEST_CASE("CHECK and WAIT count a non-empty queue as a present key", "[queue]") {
  KeyTable table;
  Peer2 peer(table);
  CHECK(peer.send(check("/q")) == hex("01"));
  peer.send(push("/q", "x"));
  CHECK(peer.send(check("/q")) == hex("00"));
  CHECK(peer.send(cat({byte(5), u64le(2), str("/q"), str("/missing")})) == hex("01"));
  CHECK(peer.send(wait({"/q"})) == kStopWaiting);  // at once
  peer.send(pop("/q"));
  CHECK(peer.send(check("/q")) == hex("01"));
  // In-process users (MemoryStore) see keys only: a queue never satisfies their get().
  peer.send(push("/q", "y"));
  CHECK_FALSE(table.contains_all({"/q"}));
  CHECK(table.contains_all({"/q"}, KeyTable::Presence::kTableOrQueue));
}

TEST_CASE("LIST_KEYS answers the table's keys, sorted, without the queues", "[queue]") {
  KeyTable table;
  Peer2 peer(table);
  CHECK(peer.send(list_keys()) == u64le(0));
  peer.send(cat({byte(1), str("/b"), str("2")}));
  peer.send(cat({byte(1), str("/a"), str("1")}));
  peer.send(cat({byte(4), str("init/"), u64le(1)}));
  peer.send(push("/q", "x"));
  CHECK(peer.send(list_keys()) == hex("0300000000000000"
                                      "0200000000000000 2f61"
                                      "0200000000000000 2f62"
                                      "0500000000000000 696e69742f"));
}

TEST_CASE("LIST_KEYS past the value limit cannot be served", "[queue]") {
  KeyTable table;
  Peer2 peer(table, {.max_value_bytes = 64});
  for (int i = 0; i < 4; ++i) table.set("/key" + std::to_string(i), to_bytes("v"));
  CHECK(peer.send(list_keys()).size() == 8 + 4 * (8 + 5));  // 60 bytes
  table.set("/key4", to_bytes("v"));
  CHECK_THROWS_WITH(peer.send(list_keys()),
                    "LIST_KEYS of 5 keys: the reply of 73 bytes exceeds the value limit of 64 "
                    "bytes");
}

TEST_CASE("BARRIER with world size 3: the third arrival wakes the two waiting", "[barrier]") {
  KeyTable table;
  Peer2 a(table);
  Peer2 b(table);
  Peer2 c(table);
  Peer2 watcher(table);
  CHECK(watcher.send(wait({"/bar"})).empty());
  CHECK(a.send(barrier("/bar", 3)).empty());
  // The first arrival creates the counter but wakes nobody, not even a WAIT on its key.
  CHECK(watcher.take_later().empty());
  CHECK(b.send(barrier("/bar", 3)).empty());
  CHECK(a.take_later().empty());
  CHECK(table.waiter_count() == 3);
  CHECK(c.send(barrier("/bar", 3)) == kStopWaiting);
  CHECK(a.take_later() == kStopWaiting);
  CHECK(b.take_later() == kStopWaiting);
  CHECK(watcher.take_later() == kStopWaiting);
  CHECK(table.waiter_count() == 0);
  CHECK(c.send(cat({byte(3), str("/bar")})) == str("3"));
  // Late arrivals pass at once.
  CHECK(a.send(barrier("/bar", 3)) == kStopWaiting);
}

TEST_CASE("BARRIER after CANCEL_WAIT: the count stays and the cancelled client is not woken",
          "[barrier]") {
  KeyTable table;
  Peer2 gave_up(table);
  Peer2 later(table);
  CHECK(gave_up.send(barrier("/bar", 2)).empty());
  // Its client timed out: CANCEL_WAIT answers WAIT_CANCELED and forgets the wait.
  CHECK(gave_up.send(kCancelWait) == hex("01"));
  CHECK(table.waiter_count() == 0);
  CHECK(later.send(barrier("/bar", 2)) == kStopWaiting);  // count 2
  CHECK(gave_up.take_later().empty());
  // A barrier that completed before the cancel: STOP_WAITING first, then WAIT_CANCELED.
  CHECK(gave_up.send(barrier("/next", 2)).empty());
  CHECK(later.send(barrier("/next", 2)) == kStopWaiting);
  CHECK(gave_up.take_later() == kStopWaiting);
  CHECK(gave_up.send(kCancelWait) == hex("01"));
}

TEST_CASE("BARRIER on a value that is not an integer cannot be served", "[barrier]") {
  KeyTable table;
  Peer2 peer(table);
  peer.send(cat({byte(1), str("/s"), str("abc")}));
  CHECK_THROWS_WITH(peer.send(barrier("/s", 2)),
                    "barrier(/s): the stored value is not a decimal integer");
}
