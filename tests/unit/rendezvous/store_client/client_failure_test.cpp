// TcpStoreClient failures: connect backoff until a late server appears, giving up after
// connect_timeout, call deadlines, a peer that closes, a server of the other dialect. Every error
// names host:port and the operation.
#include "rendezvous/store_client/tcp_store_client.hpp"

#include <set>

#include "ddp/error.hpp"
#include "rendezvous/store_client/store_connection.hpp"
#include "tests/unit/rendezvous/store_client/scripted_server.hpp"

namespace ddp::rdzv {
namespace {

using namespace test;
using namespace std::chrono_literals;

ConnectOptions retry_options(WireDialect dialect) {
  ConnectOptions o;
  o.connect_timeout = 5s;
  o.initial_backoff = 1ms;
  o.max_backoff = 20ms;
  o.call_timeout = 5s;
  o.dialect = dialect;
  return o;
}

// A port nothing listens on (bound, read back, closed).
std::uint16_t closed_port(asio::io_context& io) {
  auto acceptor = make_acceptor(io);
  return acceptor.local_endpoint().port();
}

TEST_CASE("connect retries with backoff until the server starts listening", "[client][backoff]") {
  asio::io_context io;
  const auto port = closed_port(io);
  auto server = [&]() -> asio::awaitable<void> {
    asio::steady_timer later(io, 150ms);  // several refused attempts first
    co_await later.async_wait(asio::use_awaitable);
    auto acceptor = make_acceptor(io, port);
    auto s = co_await acceptor.async_accept(asio::use_awaitable);
    co_await answer_handshake(s);
    co_await expect_bytes(s, "07");
    co_await write_all(s, hex("0000000000000000"));
  };
  auto client = [&]() -> asio::awaitable<void> {
    const auto start = std::chrono::steady_clock::now();
    auto c = co_await TcpStoreClient::connect("127.0.0.1", port, retry_options(WireDialect::kTorch2));
    CHECK(std::chrono::steady_clock::now() - start >= 150ms);
    const auto n = co_await c->num_keys();
    CHECK(n == 0);
  };
  run_pair(io, server(), client());
}

TEST_CASE("connect gives up after connect_timeout naming host:port and the last error",
          "[client][backoff]") {
  asio::io_context io;
  const auto port = closed_port(io);
  auto o = retry_options(WireDialect::kTorch2);
  o.connect_timeout = 200ms;
  auto client = [&]() -> asio::awaitable<void> {
    const auto message =
        co_await thrown<TimeoutError>(TcpStoreClient::connect("127.0.0.1", port, o));
    CHECK(message == "store at 127.0.0.1:" + std::to_string(port) +
                         " unreachable after 200ms: Connection refused");
  };
  run_pair(io, []() -> asio::awaitable<void> { co_return; }(), client());
}

TEST_CASE("an unknown host is retried and reported", "[client][backoff]") {
  asio::io_context io;
  auto o = retry_options(WireDialect::kTorch113);
  o.connect_timeout = 100ms;
  auto client = [&]() -> asio::awaitable<void> {
    const auto message =
        co_await thrown<TimeoutError>(TcpStoreClient::connect("no-such-host.invalid", 29500, o));
    CHECK_THAT(message, Catch::StartsWith("store at no-such-host.invalid:29500 unreachable"));
  };
  run_pair(io, []() -> asio::awaitable<void> { co_return; }(), client());
}

TEST_CASE("a call the server never answers times out naming the operation and host:port",
          "[client][timeout]") {
  asio::io_context io;
  auto acceptor = make_acceptor(io);
  const auto port = acceptor.local_endpoint().port();
  auto o = retry_options(WireDialect::kTorch113);
  o.call_timeout = 100ms;
  auto server = [&]() -> asio::awaitable<void> {
    auto s = co_await acceptor.async_accept(asio::use_awaitable);
    co_await read_exact(s, 1 + 8 + 4 + 8);  // ADD, never answered
    const bool eof = co_await read_until_eof(s);
    CHECK(eof);  // the client gave up and closed
  };
  auto client = [&]() -> asio::awaitable<void> {
    auto c = co_await TcpStoreClient::connect("127.0.0.1", port, o);
    const auto message = co_await thrown<TimeoutError>(c->add("/cnt", 1));
    CHECK(message == "store add(/cnt, 1) timed out after 100ms at 127.0.0.1:" +
                         std::to_string(port));
  };
  run_pair(io, server(), client());
}

TEST_CASE("each call times out at its own deadline, whatever the calls before it allowed",
          "[client][timeout]") {
  // The deadline timer is not re-armed per call: a call after one with a longer deadline must
  // still end at its own, and one after a shorter deadline must not end at that one.
  asio::io_context io;
  auto acceptor = make_acceptor(io);
  const auto port = acceptor.local_endpoint().port();
  auto o = retry_options(WireDialect::kTorch113);
  o.call_timeout = 2s;
  auto server = [&]() -> asio::awaitable<void> {
    auto s = co_await acceptor.async_accept(asio::use_awaitable);
    co_await read_exact(s, 1 + 8 + 4 + 8);  // ADD, answered
    co_await write_all(s, hex("0100000000000000"));
    co_await read_exact(s, 1 + 8 + 4 + 8);  // ADD, never answered
    co_await read_until_eof(s);
    auto again = co_await acceptor.async_accept(asio::use_awaitable);
    co_await read_exact(again, 1 + 8 + 4 + 8);  // ADD, answered after 300 ms
    asio::steady_timer later(io, 300ms);
    co_await later.async_wait(asio::use_awaitable);
    co_await write_all(again, hex("0200000000000000"));
    co_await read_until_eof(again);
  };
  auto client = [&]() -> asio::awaitable<void> {
    auto c = co_await TcpStoreClient::connect("127.0.0.1", port, o);
    const auto first = co_await c->add("/cnt", 1);  // a 2 s deadline, ended at once
    CHECK(first == 1);
    c->set_timeout(100ms);
    const auto start = std::chrono::steady_clock::now();
    const auto message = co_await thrown<TimeoutError>(c->add("/cnt", 1));
    CHECK_THAT(message, Catch::StartsWith("store add(/cnt, 1) timed out after 100ms"));
    CHECK(std::chrono::steady_clock::now() - start < 1500ms);  // not at the 2 s one
    c->set_timeout(2s);  // reconnects; the 100 ms wait may still be pending
    const auto third = co_await c->add("/cnt", 1);
    CHECK(third == 2);
    c.reset();
  };
  run_pair(io, server(), client());
}

TEST_CASE("a server that closes mid-reply gives an IoError naming the operation",
          "[client][io]") {
  asio::io_context io;
  auto acceptor = make_acceptor(io);
  const auto port = acceptor.local_endpoint().port();
  auto server = [&]() -> asio::awaitable<void> {
    auto s = co_await acceptor.async_accept(asio::use_awaitable);
    co_await read_exact(s, 1 + 8 + 2 + 8 + 8);  // COMPARE_SET "/k" '' ''
    co_await write_all(s, hex("0500000000000000 6162"));  // 5 bytes promised, 2 sent
    s.close();
  };
  auto client = [&]() -> asio::awaitable<void> {
    auto c = co_await TcpStoreClient::connect("127.0.0.1", port, retry_options(WireDialect::kTorch113));
    Bytes empty;
    const auto message = co_await thrown<IoError>(c->compare_set("/k", empty, empty));
    CHECK(message == "store compare_set(/k) failed at 127.0.0.1:" + std::to_string(port) +
                         ": connection closed by the server");
  };
  run_pair(io, server(), client());
}

TEST_CASE("a reply longer than the value limit is a bad reply", "[client][io]") {
  asio::io_context io;
  auto acceptor = make_acceptor(io);
  const auto port = acceptor.local_endpoint().port();
  auto server = [&]() -> asio::awaitable<void> {
    auto s = co_await acceptor.async_accept(asio::use_awaitable);
    co_await read_exact(s, 1 + 8 + 8 + 2);  // WAIT
    co_await write_all(s, hex("00"));
    co_await read_exact(s, 1 + 8 + 2);  // GET
    co_await write_all(s, hex("0000000000000010"));  // 2^60 bytes
  };
  auto client = [&]() -> asio::awaitable<void> {
    auto c = co_await TcpStoreClient::connect("127.0.0.1", port, retry_options(WireDialect::kTorch113));
    const auto message = co_await thrown<IoError>(c->get("/k"));
    CHECK_THAT(message, Catch::Contains("store get(/k) failed at") && Catch::Contains("bad reply"));
  };
  run_pair(io, server(), client());
}

TEST_CASE("a server that drops the 2.x handshake is reported as the other dialect",
          "[client][io]") {
  asio::io_context io;
  auto acceptor = make_acceptor(io);
  const auto port = acceptor.local_endpoint().port();
  auto server = [&]() -> asio::awaitable<void> {
    auto s = co_await acceptor.async_accept(asio::use_awaitable);
    co_await read_exact(s, 5);  // VALIDATE: a 1.13 server reads it as SET and gives up
    s.close();
  };
  auto client = [&]() -> asio::awaitable<void> {
    const auto message = co_await thrown<IoError>(
        TcpStoreClient::connect("127.0.0.1", port, retry_options(WireDialect::kTorch2)));
    CHECK_THAT(message, Catch::Contains("127.0.0.1:" + std::to_string(port)) &&
                            Catch::Contains("speaks only the 1.13 dialect"));
  };
  run_pair(io, server(), client());
}

TEST_CASE("a PING answered with the wrong nonce fails the connect", "[client][io]") {
  asio::io_context io;
  auto acceptor = make_acceptor(io);
  const auto port = acceptor.local_endpoint().port();
  auto server = [&]() -> asio::awaitable<void> {
    auto s = co_await acceptor.async_accept(asio::use_awaitable);
    auto bytes = co_await read_exact(s, 10);
    bytes[6] ^= 0xff;
    co_await write_all(s, ByteVec(bytes.begin() + 6, bytes.end()));
  };
  auto client = [&]() -> asio::awaitable<void> {
    co_await thrown<IoError>(
        TcpStoreClient::connect("127.0.0.1", port, retry_options(WireDialect::kTorch2)));
  };
  run_pair(io, server(), client());
}

}  // namespace
}  // namespace ddp::rdzv

namespace ddp::rdzv::detail {
namespace {

using namespace std::chrono_literals;

TEST_CASE("connect pauses are jittered within half to all of the backoff", "[client][backoff]") {
  std::set<std::int64_t> seen;
  for (int i = 0; i < 200; ++i) {
    const auto pause = jittered(100ms);
    CHECK(pause >= 50ms);
    CHECK(pause <= 100ms);
    seen.insert(pause.count());
  }
  CHECK(seen.size() > 10);  // spread out, not one fixed value
  CHECK(jittered(1ms) >= 1ms);
  CHECK(jittered(0ms) >= 1ms);
}

TEST_CASE("durations in messages are whole seconds or milliseconds", "[client]") {
  CHECK(format_duration(30s) == "30s");
  CHECK(format_duration(1500ms) == "1500ms");
  CHECK(format_duration(0ms) == "0s");
}

}  // namespace
}  // namespace ddp::rdzv::detail
