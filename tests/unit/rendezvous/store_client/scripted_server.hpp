#pragma once
// Test helpers for the store client: a raw TCP peer scripted with coroutines
// (read exactly these bytes, answer those) on the test's io_context. Port 0, read back.

#include <boost/asio.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "tests/unit/rendezvous/wire_fixtures.hpp"

namespace ddp::rdzv::test {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

// A listening socket on 127.0.0.1, port 0.
inline tcp::acceptor make_acceptor(asio::io_context& io, std::uint16_t port = 0) {
  tcp::acceptor acceptor(io);
  tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), port);
  acceptor.open(ep.protocol());
  acceptor.set_option(tcp::acceptor::reuse_address(true));
  acceptor.bind(ep);
  acceptor.listen();
  return acceptor;
}

inline asio::awaitable<ByteVec> read_exact(tcp::socket& s, std::size_t n) {
  ByteVec out(n);
  co_await asio::async_read(s, asio::buffer(out), asio::use_awaitable);
  co_return out;
}

inline asio::awaitable<void> write_all(tcp::socket& s, ByteVec bytes) {
  co_await asio::async_write(s, asio::buffer(bytes), asio::use_awaitable);
}

// Reads as many bytes as `expected_hex` holds and checks they are those bytes. (GCC 12 mis-compiles
// co_await inside Catch's assertion macros: tests always co_await into a local first.)
inline asio::awaitable<void> expect_bytes(tcp::socket& s, std::string expected_hex) {
  const ByteVec expected = hex(expected_hex);
  ByteVec got = co_await read_exact(s, expected.size());
  CHECK(got == expected);
}

// Awaits `op` and returns the message of the E it throws; fails the test when it throws nothing.
template <typename E, typename T>
asio::awaitable<std::string> thrown(asio::awaitable<T> op) {
  std::string message;
  bool threw = false;
  try {
    co_await std::move(op);
  } catch (const E& e) {
    message = e.what();
    threw = true;
  }
  CHECK(threw);
  co_return message;
}

// Reads until the peer closes; true when it closed cleanly (EOF) rather than with an error.
inline asio::awaitable<bool> read_until_eof(tcp::socket& s) {
  ByteVec buf(256);
  for (;;) {
    auto [ec, n] =
        co_await s.async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
    if (ec) co_return ec == asio::error::eof;
  }
}

// Reads the 2.x handshake (VALIDATE + PING) and echoes the nonce.
inline asio::awaitable<void> answer_handshake(tcp::socket& s) {
  ByteVec bytes = co_await read_exact(s, 10);
  const ByteVec head(bytes.begin(), bytes.begin() + 6);
  REQUIRE(head == hex("00 CE F7 85 3C 0D"));
  co_await write_all(s, ByteVec(bytes.begin() + 6, bytes.end()));
}

// Runs `server` and `client` on io until both finish (at most 20 s, so a bug cannot hang the
// suite); rethrows the first exception either raised.
inline void run_pair(asio::io_context& io, asio::awaitable<void> server,
                     asio::awaitable<void> client) {
  std::exception_ptr errors[2];
  int done = 0;
  asio::co_spawn(io, std::move(server), [&](std::exception_ptr e) { errors[0] = e; ++done; });
  asio::co_spawn(io, std::move(client), [&](std::exception_ptr e) {
    errors[1] = e;
    ++done;
    if (e) io.stop();  // the failure is reported; do not wait for a server left waiting
  });
  io.run_for(std::chrono::seconds(20));
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  REQUIRE(done == 2);
}

}  // namespace ddp::rdzv::test
