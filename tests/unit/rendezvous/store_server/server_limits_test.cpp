// TcpStoreServer's fairness and memory bounds over real sockets: a client that floods requests
// without reading is paused while others are served, a watcher that does not read is closed, a
// partial request that stalls is closed, and replies or APPENDs past the value limit close only
// their connection.

#include "rendezvous/store/memory_store.hpp"
#include "rendezvous/store/key_table.hpp"
#include "tests/unit/rendezvous/store_server/raw_client.hpp"

#include <fcntl.h>

using namespace ddp::rdzv;
using namespace ddp::rdzv::test;

namespace {

StoreLimits small_limits() {
  StoreLimits limits;
  limits.max_queued_bytes = 256 << 10;
  limits.max_value_bytes = 1 << 20;
  return limits;
}

// Sends as much of `bytes` (repeated) as the socket takes without blocking; returns bytes sent.
std::size_t send_until_full(RawClient& client, const ByteVec& bytes, std::size_t max_bytes) {
  const int fd = client.socket().native_handle();
  const int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  std::size_t sent = 0;
  std::size_t offset = 0;
  int idle_rounds = 0;
  while (sent < max_bytes && idle_rounds < 10) {
    const ssize_t n = ::send(fd, bytes.data() + offset, bytes.size() - offset, MSG_NOSIGNAL);
    if (n <= 0) {
      // Full: let the server take another turn, then try again; 10 misses in a row: paused.
      pollfd p{fd, POLLOUT, 0};
      idle_rounds += ::poll(&p, 1, 20) == 0 ? 1 : 0;
      continue;
    }
    idle_rounds = 0;
    sent += static_cast<std::size_t>(n);
    offset = (offset + static_cast<std::size_t>(n)) % bytes.size();
  }
  ::fcntl(fd, F_SETFL, flags);
  return sent;
}

}  // namespace

TEST_CASE("a client that floods requests without reading is paused; others are served") {
  ServerThread server("127.0.0.1", small_limits());
  RawClient flooder(server.port());
  RawClient probe(server.port());
  flooder.send(cat({byte(0), str("/v"), str(std::string(4096, 'x'))}));
  // GETs of a 4 KiB value, never read: 64 MiB of replies if the server answered them all.
  ByteVec gets;
  for (int i = 0; i < 64; ++i) gets = cat({gets, byte(2), str("/v")});
  const std::size_t sent = send_until_full(flooder, gets, std::size_t{64} << 20);
  INFO("flooder sent " << sent << " bytes of requests");
  CHECK(sent <
        (std::size_t{24} << 20));  // the server stopped reading it (the rest: kernel buffers)
  CHECK(probe.call(hex("06"), 8) == u64le(1));
  const std::size_t queued = server.on_server([](TcpStoreServer& s) { return s.queued_bytes(); });
  CHECK(queued <= (256 << 10) + 4096 + 8);
  // Reading its replies resumes it; it is served in order.
  CHECK(flooder.recv(8 + 4096) == str(std::string(4096, 'x')));
}

TEST_CASE("a watcher that does not read is closed once its queue passes the limit") {
  ServerThread server("127.0.0.1", small_limits());
  RawClient watcher(server.port());
  CHECK(watcher.call(cat({byte(7), str("/w")}), 1) == hex("03"));
  RawClient writer(server.port());
  const ByteVec value(64 << 10, 1);
  // Each event carries the old and the new value: 128 KiB, 37.5 MiB for 300 writes, more than
  // the kernel's socket buffers hold (about 10 MiB on loopback).
  for (int i = 0; i < 300; ++i) writer.send(cat({byte(0), str("/w"), u64le(value.size()), value}));
  CHECK(writer.call(hex("06"), 8) == u64le(1));
  // The watcher reads what was queued before the limit, then the end of the connection.
  std::size_t received = 0;
  std::uint8_t chunk[65536];
  boost::system::error_code ec;
  while (!ec) received += watcher.socket().read_some(asio::buffer(chunk), ec);
  CHECK((ec == asio::error::eof || ec == asio::error::connection_reset));
  CHECK(received < std::size_t{300} * 2 * value.size());
  CHECK(server.on_server([](TcpStoreServer& s) { return s.queued_bytes(); }) == 0);
}

TEST_CASE("a connection holding part of a request closes after the partial-request timeout") {
  StoreLimits limits;
  limits.partial_request_timeout = std::chrono::milliseconds(100);
  ServerThread server("127.0.0.1", limits);
  RawClient idle(server.port());
  CHECK(idle.call(hex("06"), 8) == u64le(0));
  RawClient stalled(server.port());
  stalled.send(cat({byte(0), str("/half"), u64le(1000), str("only a few bytes")}));
  CHECK(stalled.is_closed_by_server());
  // A connection between requests is never timed out.
  CHECK(idle.is_silent_for(300));
  CHECK(idle.call(hex("06"), 8) == u64le(0));
}

TEST_CASE("a reply or an APPEND past the value limit closes only its connection") {
  ServerThread server("127.0.0.1", small_limits());
  RawClient good(server.port());
  const ByteVec value(600 << 10, 2);
  good.send(cat({byte(0), str("/big"), u64le(value.size()), value}));
  CHECK(good.call(hex("06"), 8) == u64le(1));
  SECTION("MULTI_GET of one key twice") {
    RawClient greedy(server.port());
    greedy.send(cat({byte(10), u64le(2), str("/big"), str("/big")}));
    CHECK(greedy.is_closed_by_server());
  }
  SECTION("APPEND past 1 MiB, refused before its bytes arrive") {
    RawClient appender(server.port());
    appender.send(cat({byte(9), str("/big"), u64le(value.size()), str("a few bytes")}));
    CHECK(appender.is_closed_by_server());
    CHECK(good.call(cat({byte(2), str("/big")}), 8 + value.size()) ==
          cat({u64le(value.size()), value}));
  }
  CHECK(good.call(hex("06"), 8) == u64le(1));
}

TEST_CASE("a large value split across many turns arrives intact while another client is served") {
  ServerThread server;
  RawClient big(server.port());
  RawClient probe(server.port());
  // 32 MiB announced, 16 MiB sent: the server reads what arrives, one buffer per turn, and
  // answers the probe meanwhile; the rest then completes the SET.
  const ByteVec half(16 << 20, 3);
  big.send(cat({byte(0), str("/big"), u64le(2 * half.size()), half}));
  CHECK(probe.call(hex("06"), 8) == u64le(0));
  big.send(half);
  CHECK(big.call(hex("06"), 8) == u64le(1));
  CHECK(probe.call(cat({byte(2), str("/big")}), 8) == u64le(2 * half.size()));
  CHECK(probe.recv(2 * half.size()) == cat({half, half}));
}
