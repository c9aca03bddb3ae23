// TcpStoreServer over real sockets: both dialects on one port, waits across connections, bad input
// closing only its own connection, a waiting client that disconnects, port 0, IPv6, a taken port.

#include <unistd.h>

#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include "ddp/error.hpp"
#include "rendezvous/store/key_table.hpp"
#include "rendezvous/store/memory_store.hpp"
#include "tests/unit/rendezvous/store_server/raw_client.hpp"

using namespace ddp::rdzv;
using namespace ddp::rdzv::test;

TEST_CASE("a 1.13 client and a 2.x client share one server") {
  ServerThread server;
  RawClient old_client(server.port());
  RawClient new_client(server.port());
  old_client.send(hex("00 0300000000000000 2f6b31 0200000000000000 7631"));  // SET /k1 v1
  new_client.send(validate());
  CHECK(new_client.call(hex("0D 92100000"), 4) == hex("92100000"));
  // 2.x GET (3) of the key the 1.13 client wrote; 1.13 ADD (3) on the other connection.
  CHECK(new_client.call(cat({byte(3), str("/k1")}), 10) == str("v1"));
  CHECK(old_client.call(cat({byte(3), str("/cnt"), u64le(5)}), 8) == u64le(5));
  CHECK(new_client.call(cat({byte(4), str("/cnt"), u64le(2)}), 8) == u64le(7));
  CHECK(old_client.call(hex("06"), 8) == u64le(2));
  CHECK(new_client.call(byte(7), 8) == u64le(2));
}

TEST_CASE("a WAIT on one connection is answered when another sets the key") {
  ServerThread server;
  RawClient waiter(server.port());
  RawClient writer(server.port());
  waiter.send(cat({byte(5), u64le(1), str("/late")}));
  CHECK(waiter.is_silent_for(50));
  writer.send(cat({byte(0), str("/late"), str("x")}));
  CHECK(waiter.recv(1) == hex("00"));
}

TEST_CASE("a blocking 2.x queue_pop is woken by another connection's push") {
  ServerThread server;
  RawClient popper(server.port());
  RawClient pusher(server.port());
  popper.send(validate());
  pusher.send(validate());
  // PyTorch's queue_pop(block=True): WAIT on the key, then QUEUE_POP.
  popper.send(cat({byte(6), u64le(1), str("/jobs")}));
  CHECK(popper.is_silent_for(50));
  pusher.send(cat({byte(14), str("/jobs"), str("late")}));
  CHECK(popper.recv(1) == hex("00"));
  CHECK(popper.call(cat({byte(15), str("/jobs")}), 20) == cat({u64le(1), str("late")}));
  CHECK(pusher.call(cat({byte(16), str("/jobs")}), 8) == u64le(0));
}

TEST_CASE("in-process writes through store() wake remote waiters") {
  ServerThread server;
  RawClient waiter(server.port());
  waiter.send(cat({byte(5), u64le(1), str("/agent")}));
  CHECK(waiter.is_silent_for(20));
  server.on_server([](TcpStoreServer& s) {
    s.store().table().set("/agent", to_bytes("here"));
    return 0;
  });
  CHECK(waiter.recv(1) == hex("00"));
  CHECK(waiter.call(cat({byte(2), str("/agent")}), 12) == str("here"));
}

TEST_CASE("bad input closes only the offending connection") {
  ServerThread server;
  RawClient good(server.port());
  good.send(cat({byte(0), str("/k"), str("v")}));
  SECTION("garbage") {
    RawClient bad(server.port());
    bad.send(hex("FF FE FD"));
    CHECK(bad.is_closed_by_server());
  }
  SECTION("a 2^60 value length") {
    RawClient bad(server.port());
    bad.send(cat({byte(0), str("/k"), u64le(std::uint64_t{1} << 60)}));
    CHECK(bad.is_closed_by_server());
  }
  SECTION("an unknown 2.x command after the handshake") {
    RawClient bad(server.port());
    bad.send(cat({validate(), byte(19)}));
    CHECK(bad.is_closed_by_server());
  }
  SECTION("2.x's QUEUE_PUSH byte on a 1.13 connection") {
    RawClient bad(server.port());
    bad.send(cat({byte(14), str("/q"), str("v")}));
    CHECK(bad.is_closed_by_server());
  }
  SECTION("ADD on text") {
    RawClient bad(server.port());
    bad.send(cat({byte(3), str("/k"), u64le(1)}));
    CHECK(bad.is_closed_by_server());
  }
  SECTION("a truncated frame, then the peer leaves") {
    {
      RawClient bad(server.port());
      bad.send(hex("00 0300000000000000 2f"));
    }
  }
  CHECK(good.call(cat({byte(2), str("/k")}), 9) == str("v"));
}

TEST_CASE("replies queued before bad input are still delivered") {
  ServerThread server;
  RawClient client(server.port());
  client.send(cat({hex("06"), hex("FF")}));
  CHECK(client.recv(8) == u64le(0));
  CHECK(client.is_closed_by_server());
}

TEST_CASE("a waiting client that disconnects is forgotten") {
  ServerThread server;
  {
    RawClient waiter(server.port());
    waiter.send(cat({byte(5), u64le(1), str("/never")}));
    CHECK(waiter.is_silent_for(20));
  }
  RawClient other(server.port());
  CHECK(other.call(hex("06"), 8) == u64le(0));
  // The server sees the close asynchronously: look until it has dropped the waiter.
  const bool forgotten = [&] {
    for (int i = 0; i < 200; ++i) {
      if (server.on_server([](TcpStoreServer& s) { return s.store().table().waiter_count(); }) == 0)
        return true;
      ::usleep(10000);
    }
    return false;
  }();
  CHECK(forgotten);
  CHECK(server.connection_count() == 1);  // the waiter's connection is gone too
  other.send(cat({byte(0), str("/never"), str("x")}));
  CHECK(other.call(hex("06"), 8) == u64le(1));
}

TEST_CASE("stop() closes every connection and the server counts them") {
  asio::io_context io;
  TcpStoreServer server(io, "127.0.0.1", 0);
  server.start();
  std::thread thread([&] { io.run_for(std::chrono::seconds(10)); });
  RawClient a(server.port());
  RawClient b(server.port());
  CHECK(a.call(hex("06"), 8) == u64le(0));
  CHECK(b.call(hex("06"), 8) == u64le(0));
  // Catch's macros are not thread-safe: look on the server's thread, check on this one.
  const auto counts = asio::post(io, asio::use_future([&] {
                                   const auto before = server.connection_count();
                                   server.stop();
                                   return std::make_pair(before, server.connection_count());
                                 }))
                          .get();
  CHECK(counts.first == 2);
  CHECK(counts.second == 0);
  CHECK(a.is_closed_by_server());
  CHECK(b.is_closed_by_server());
  io.stop();
  thread.join();
}

TEST_CASE("port 0 picks a free port, and :: serves IPv6 and IPv4") {
  ServerThread server("::");
  CHECK(server.port() != 0);
  RawClient v4(server.port(), "127.0.0.1");
  RawClient v6(server.port(), "::1");
  v4.send(cat({byte(0), str("/x"), str("4")}));
  // SET has no reply: a round trip on the same connection orders it before the other's GET.
  CHECK(v4.call(hex("06"), 8) == u64le(1));
  CHECK(v6.call(cat({byte(2), str("/x")}), 9) == str("4"));
}

TEST_CASE("a taken port is an IoError naming the port and its owner") {
  ServerThread first;
  asio::io_context io;
  const auto port = first.port();
  try {
    TcpStoreServer second(io, "127.0.0.1", port);
    FAIL("bound a taken port");
  } catch (const ddp::IoError& e) {
    const std::string message = e.what();
    INFO(message);
    CHECK(message.find("cannot listen on 127.0.0.1:" + std::to_string(port)) != std::string::npos);
    CHECK(message.find("port " + std::to_string(port) + " is taken by pid " +
                       std::to_string(::getpid())) != std::string::npos);
  }
}

TEST_CASE("a large value arrives intact in both directions") {
  ServerThread server;
  RawClient client(server.port());
  ByteVec value(4 << 20);
  for (std::size_t i = 0; i < value.size(); ++i) value[i] = static_cast<std::uint8_t>(i * 7);
  client.send(cat({byte(0), str("/big"), u64le(value.size()), value}));
  const ByteVec reply = client.call(cat({byte(2), str("/big")}), 8 + value.size());
  CHECK(reply == cat({u64le(value.size()), value}));
}

TEST_CASE("requests sent right after connecting are answered") {
  ServerThread server;
  for (int i = 0; i < 300; ++i) {
    RawClient client(server.port());
    CHECK(client.call(hex("06"), 8) == u64le(0));
  }
}

TEST_CASE("a client that reads its replies late is paused, then served in full") {
  ServerThread server;
  RawClient client(server.port());
  const ByteVec value(1 << 20, 0xAB);
  client.send(cat({byte(0), str("/mb"), u64le(value.size()), value}));
  // 80 GETs: 80 MiB of replies, past the 64 MiB the server queues before it stops reading.
  ByteVec requests;
  for (int i = 0; i < 80; ++i) requests = cat({requests, byte(2), str("/mb")});
  client.send(requests);
  for (int i = 0; i < 80; ++i) {
    INFO("reply " << i);
    REQUIRE(client.recv(8 + value.size()) == cat({u64le(value.size()), value}));
  }
  CHECK(client.call(hex("06"), 8) == u64le(1));
}
