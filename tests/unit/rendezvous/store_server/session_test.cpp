// ServerSession + RequestParser on a KeyTable: the server's replies byte for byte against the
// captured 1.13 conversation (§5.9), 2.x PING/CANCEL_WAIT, parked waits, and 1.13 watch events.

#include "tests/unit/rendezvous/store_server/session_peer.hpp"

using namespace ddp::rdzv;
using namespace ddp::rdzv::test;

TEST_CASE("the server answers the captured 1.13 conversation byte for byte") {
  KeyTable table;
  Peer peer(table);
  CHECK(peer.send(hex("00 0300000000000000 2f6b31 0200000000000000 7631")).empty());
  CHECK(peer.send(hex("05 0100000000000000 0300000000000000 2f6b31")) == hex("00"));
  CHECK(peer.send(hex("02 0300000000000000 2f6b31")) == hex("0200000000000000 7631"));
  CHECK(peer.send(hex("03 0400000000000000 2f636e74 0500000000000000")) ==
        hex("0500000000000000"));
  CHECK(peer.send(hex("03 0400000000000000 2f636e74 feffffffffffffff")) ==
        hex("0300000000000000"));
  CHECK(peer.send(hex("01 0300000000000000 2f6b31 0200000000000000 7631 0200000000000000 7632")) ==
        hex("0200000000000000 7632"));
  CHECK(peer.send(hex("01 0500000000000000 2f6e65776b 0000000000000000 0100000000000000 78")) ==
        hex("0100000000000000 78"));
  CHECK(peer.send(hex("01 0800000000000000 2f6d697373696e67 0300000000000000 657870 "
                      "0100000000000000 79")) == hex("0300000000000000 657870"));
  CHECK(peer.send(hex("06")) == hex("0300000000000000"));
  CHECK(peer.send(hex("05 0200000000000000 0300000000000000 2f6b31 0400000000000000 2f636e74")) ==
        hex("00"));
  CHECK(peer.send(hex("08 0300000000000000 2f6b31")) == hex("0100000000000000"));
  CHECK(peer.send(hex("08 0300000000000000 2f6b31")) == hex("0000000000000000"));
  CHECK(peer.send(hex("04 0100000000000000 0300000000000000 2f636b")) == hex("01"));
  CHECK(peer.send(hex("07 0300000000000000 2f776b")) == hex("03"));
  CHECK(peer.take_later().empty());
  // The counter is stored as decimal text.
  REQUIRE(table.find("/cnt") != nullptr);
  CHECK(to_string(*table.find("/cnt")) == "3");
}

TEST_CASE("1.13 watch events: created, updated, deleted, as captured") {
  KeyTable table;
  Peer watcher(table);
  Peer writer(table);
  CHECK(watcher.send(cat({byte(7), str("/wk")})) == hex("03"));
  writer.send(cat({byte(0), str("/wk"), str("A")}));
  CHECK(watcher.take_later() ==
        hex("01 0300000000000000 2f776b 0000000000000000 0100000000000000 41"));
  writer.send(cat({byte(0), str("/wk"), str("BB")}));
  CHECK(watcher.take_later() == hex("00 0300000000000000 2f776b 0100000000000000 41 "
                                    "0200000000000000 4242"));
  writer.send(cat({byte(8), str("/wk")}));
  CHECK(watcher.take_later() == cat({byte(2), str("/wk"), str("BB"), str("")}));
  writer.send(cat({byte(3), str("/wk"), u64le(2)}));  // ADD creates it again
  CHECK(watcher.take_later() == cat({byte(1), str("/wk"), str(""), str("2")}));
  watcher.session.close();
  writer.send(cat({byte(0), str("/wk"), str("C")}));
  CHECK(watcher.take_later().empty());
}

TEST_CASE("a parked WAIT answers STOP_WAITING when the last key appears") {
  KeyTable table;
  Peer waiter(table);
  Peer writer(table);
  CHECK(waiter.send(cat({byte(5), u64le(2), str("/a"), str("/b")})).empty());
  CHECK(waiter.session.is_waiting());
  writer.send(cat({byte(0), str("/a"), str("1")}));
  CHECK(waiter.take_later().empty());
  writer.send(cat({byte(3), str("/b"), u64le(1)}));  // ADD wakes waiters too
  CHECK(waiter.take_later() == hex("00"));
  CHECK_FALSE(waiter.session.is_waiting());
  CHECK(table.waiter_count() == 0);
}

TEST_CASE("COMPARE_SET that creates a key wakes its waiters") {
  KeyTable table;
  Peer waiter(table);
  Peer writer(table);
  waiter.send(cat({byte(5), u64le(1), str("/c")}));
  writer.send(cat({byte(1), str("/c"), str(""), str("x")}));
  CHECK(waiter.take_later() == hex("00"));
}

TEST_CASE("a 1.13 wait that timed out on the client is dropped by its next request") {
  KeyTable table;
  Peer waiter(table);
  Peer writer(table);
  waiter.send(cat({byte(5), u64le(1), str("/nokey")}));
  CHECK(table.waiter_count() == 1);
  // The client gave up silently and asks something else: no stray STOP_WAITING later.
  CHECK(waiter.send(hex("06")) == hex("0000000000000000"));
  CHECK(table.waiter_count() == 0);
  writer.send(cat({byte(0), str("/nokey"), str("x")}));
  CHECK(waiter.take_later().empty());
}

TEST_CASE("2.x: VALIDATE, PING echoes the nonce, CANCEL_WAIT answers WAIT_CANCELED") {
  KeyTable table;
  Peer peer(table);
  CHECK(peer.send(validate()).empty());
  CHECK(peer.send(hex("0D 92100000")) == hex("92100000"));
  CHECK(peer.send(cat({byte(6), u64le(1), str("/k")})).empty());
  CHECK(table.waiter_count() == 1);
  CHECK(peer.send(byte(12)) == hex("01"));
  CHECK(table.waiter_count() == 0);
  // A wait that completed before the cancel: STOP_WAITING went first, then WAIT_CANCELED.
  Peer writer(table);
  writer.send(validate());
  peer.send(cat({byte(6), u64le(1), str("/k")}));
  writer.send(cat({byte(1), str("/k"), str("v")}));
  CHECK(peer.take_later() == hex("00"));
  CHECK(peer.send(byte(12)) == hex("01"));
}

TEST_CASE("2.x: GET miss answers an empty value, MULTI_GET and MULTI_SET, APPEND") {
  KeyTable table;
  Peer peer(table);
  peer.send(validate());
  CHECK(peer.send(cat({byte(3), str("/none")})) == str(""));
  CHECK(peer.send(cat({byte(11), u64le(2), str("/a"), str("1"), str("/b"), str("22")})).empty());
  CHECK(peer.send(cat({byte(10), u64le(2), str("/b"), str("/a")})) == cat({str("22"), str("1")}));
  CHECK(peer.send(cat({byte(9), str("/a"), str("+x")})).empty());
  CHECK(peer.send(cat({byte(3), str("/a")})) == str("1+x"));
  CHECK(peer.send(cat({byte(9), str("/new"), str("y")})).empty());
  CHECK(peer.send(byte(7)) == u64le(3));
}

TEST_CASE("ADD on a value that is not an integer cannot be served") {
  KeyTable table;
  Peer peer(table);
  peer.send(cat({byte(0), str("/s"), str("abc")}));
  CHECK_THROWS_WITH(peer.send(cat({byte(3), str("/s"), u64le(1)})),
                    "add(/s): the stored value is not a decimal integer");
  table.set("/max", to_bytes("9223372036854775807"));
  CHECK_THROWS_WITH(table.add("/max", 1),
                    "add(/max): 9223372036854775807 + 1 overflows a 64-bit integer");
}

TEST_CASE("a closed session forgets its wait and its watches") {
  KeyTable table;
  {
    Peer peer(table);
    peer.send(cat({byte(5), u64le(1), str("/w")}));
    peer.send(cat({byte(7), str("/x")}));
  }
  CHECK(table.waiter_count() == 0);
  table.set("/w", to_bytes("1"));  // would call into the destroyed session if remembered
  table.set("/x", to_bytes("1"));
}

TEST_CASE("too many watches on one connection cannot be served") {
  KeyTable table;
  Peer peer(table);  // 16 watches at most
  for (int i = 0; i < 16; ++i) peer.send(cat({byte(7), str("/k" + std::to_string(i))}));
  CHECK_THROWS(peer.send(cat({byte(7), str("/one-more")})));
}
