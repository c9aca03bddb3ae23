// TcpStoreClient against a scripted raw-socket server: the bytes each operation sends in both
// dialects, get = WAIT then GET, how a wait deadline is cancelled (CANCEL_WAIT and its race), and
// what destroying the client does to the calls still in flight.
#include "rendezvous/store_client/tcp_store_client.hpp"

#include "ddp/error.hpp"
#include "tests/unit/rendezvous/store_client/scripted_server.hpp"

namespace ddp::rdzv {
namespace {

using namespace test;
using namespace std::chrono_literals;

ConnectOptions options(WireDialect dialect) {
  ConnectOptions o;
  o.connect_timeout = 5s;
  o.initial_backoff = 1ms;
  o.call_timeout = 5s;
  o.dialect = dialect;
  return o;
}

// One wire-level test: a scripted server listening on 127.0.0.1 (port 0, read back) and the client
// under test, both on `io`.
struct WireTest {
  // Accepts the client's next connection; in the 2.x dialect, also answers its handshake.
  asio::awaitable<tcp::socket> accept(WireDialect dialect) {
    auto s = co_await acceptor.async_accept(asio::use_awaitable);
    if (dialect == WireDialect::kTorch2) co_await answer_handshake(s);
    co_return s;
  }
  asio::awaitable<std::unique_ptr<TcpStoreClient>> connect(WireDialect dialect) {
    return TcpStoreClient::connect("127.0.0.1", port, options(dialect));
  }
  // Runs the server's script and the client's until both end (run_pair).
  void run(asio::awaitable<void> server, asio::awaitable<void> client) {
    run_pair(io, std::move(server), std::move(client));
  }

  asio::io_context io;
  tcp::acceptor acceptor = make_acceptor(io);
  const std::uint16_t port = acceptor.local_endpoint().port();
};

// A flag one coroutine raises and another awaits (a timer as a condition variable). wait() gives
// up after `guard`, so that a bug fails the test instead of hanging it, and says whether the flag
// was raised.
struct Signal {
  explicit Signal(asio::io_context& io) : timer(io) {}
  void raise() {
    raised = true;
    timer.cancel();
  }
  asio::awaitable<bool> wait(std::chrono::milliseconds guard = 5s) {
    if (!raised) {
      timer.expires_after(guard);
      co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    co_return raised;
  }
  asio::steady_timer timer;
  bool raised = false;
};

// An operation spawned on its own, so that it can outlive its client, and how it ended. Shared
// with the completion handler, which may run after the test's coroutine has returned.
struct Detached {
  explicit Detached(asio::io_context& io) : ended(io) {}
  Signal ended;
  std::exception_ptr error;
};

template <typename T>
std::shared_ptr<Detached> detach(asio::io_context& io, asio::awaitable<T> op) {
  auto d = std::make_shared<Detached>(io);
  asio::co_spawn(io, std::move(op), [d](std::exception_ptr e, auto&&...) {
    d->error = e;
    d->ended.raise();
  });
  return d;
}

// The message of the IoError held by `error`; fails the test for anything else.
std::string io_error_message(const std::exception_ptr& error) {
  REQUIRE(error);
  try {
    std::rethrow_exception(error);
  } catch (const IoError& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL("expected an IoError, got: " << e.what());
  }
  return {};
}

TEST_CASE_METHOD(WireTest, "2.x client handshakes, then get sends WAIT then GET", "[client]") {
  auto server = [&]() -> asio::awaitable<void> {
    auto s = co_await accept(WireDialect::kTorch2);
    co_await expect_bytes(s, "01 0300000000000000 2f6b31 0200000000000000 7631");
    co_await expect_bytes(s, "06 0100000000000000 0300000000000000 2f6b31");
    co_await write_all(s, hex("00"));
    co_await expect_bytes(s, "03 0300000000000000 2f6b31");
    co_await write_all(s, hex("0200000000000000 7631"));
    co_await expect_bytes(s, "04 0400000000000000 2f636e74 0500000000000000");
    co_await write_all(s, hex("0500000000000000"));
    co_await expect_bytes(s, "07");
    co_await write_all(s, hex("0200000000000000"));
  };
  auto client = [&]() -> asio::awaitable<void> {
    auto c = co_await connect(WireDialect::kTorch2);
    CHECK(c->address() == "127.0.0.1:" + std::to_string(port));
    co_await c->set("/k1", to_bytes("v1"));
    const Bytes value = co_await c->get("/k1");
    CHECK(to_string(value) == "v1");
    const auto added = co_await c->add("/cnt", 5);
    CHECK(added == 5);
    const auto n = co_await c->num_keys();
    CHECK(n == 2);
  };
  run(server(), client());
}

TEST_CASE_METHOD(WireTest, "1.13 client sends no handshake and uses the 1.13 numbering",
                 "[client]") {
  auto server = [&]() -> asio::awaitable<void> {
    auto s = co_await accept(WireDialect::kTorch113);
    co_await expect_bytes(s, "01 0300000000000000 2f6b31 0000000000000000 0100000000000000 78");
    co_await write_all(s, hex("0100000000000000 78"));
    co_await expect_bytes(s, "04 0100000000000000 0300000000000000 2f636b");
    co_await write_all(s, hex("01"));
    co_await expect_bytes(s, "08 0300000000000000 2f6b31");
    co_await write_all(s, hex("0100000000000000"));
    // multi_set and multi_get: plain SETs, then WAIT and one GET per key, pipelined.
    co_await expect_bytes(s, ("00 0200000000000000 2f61 0100000000000000 31"
              "00 0200000000000000 2f62 0100000000000000 32"));
    co_await expect_bytes(s, ("05 0200000000000000 0200000000000000 2f61 0200000000000000 2f62"));
    co_await write_all(s, hex("00"));
    co_await expect_bytes(s, ("02 0200000000000000 2f61 02 0200000000000000 2f62"));
    co_await write_all(s, hex("0100000000000000 31 0100000000000000 32"));
  };
  auto client = [&]() -> asio::awaitable<void> {
    auto c = co_await connect(WireDialect::kTorch113);
    Bytes empty;
    const Bytes swapped = co_await c->compare_set("/k1", empty, to_bytes("x"));
    CHECK(to_string(swapped) == "x");
    std::vector<std::string> ck{"/ck"};
    const bool ready = co_await c->check(ck);
    CHECK_FALSE(ready);
    const bool deleted = co_await c->delete_key("/k1");
    CHECK(deleted);
    std::vector<std::pair<std::string, Bytes>> kvs{{"/a", to_bytes("1")}, {"/b", to_bytes("2")}};
    co_await c->multi_set(kvs);
    std::vector<std::string> ab{"/a", "/b"};
    auto values = co_await c->multi_get(ab);
    std::vector<Bytes> expected{to_bytes("1"), to_bytes("2")};
    CHECK(values == expected);
  };
  run(server(), client());
}

TEST_CASE_METHOD(WireTest, "2.x multi_get and multi_set use MULTI_GET and MULTI_SET", "[client]") {
  auto server = [&]() -> asio::awaitable<void> {
    auto s = co_await accept(WireDialect::kTorch2);
    co_await expect_bytes(s, "0B 0100000000000000 0200000000000000 2f61 0100000000000000 31");
    co_await expect_bytes(s, "06 0100000000000000 0200000000000000 2f61");
    co_await write_all(s, hex("00"));
    co_await expect_bytes(s, "0A 0100000000000000 0200000000000000 2f61");
    co_await write_all(s, hex("0100000000000000 31"));
  };
  auto client = [&]() -> asio::awaitable<void> {
    auto c = co_await connect(WireDialect::kTorch2);
    std::vector<std::pair<std::string, Bytes>> kvs{{"/a", to_bytes("1")}};
    co_await c->multi_set(kvs);
    std::vector<std::string> a{"/a"};
    auto values = co_await c->multi_get(a);
    REQUIRE(values.size() == 1);
    CHECK(to_string(values[0]) == "1");
  };
  run(server(), client());
}

TEST_CASE_METHOD(WireTest, "multi_get_existing reads without a WAIT in both dialects",
                 "[client]") {
  // Issue 24: a key the caller knows exists costs one request, not a WAIT and a read.
  auto client = [&](WireDialect dialect) -> asio::awaitable<void> {
    auto c = co_await connect(dialect);
    std::vector<std::string> ab{"/a", "/b"};
    auto values = co_await c->multi_get_existing(ab);
    std::vector<Bytes> expected{to_bytes("1"), to_bytes("2")};
    CHECK(values == expected);
  };
  SECTION("2.x: one MULTI_GET") {
    auto server = [&]() -> asio::awaitable<void> {
      auto s = co_await accept(WireDialect::kTorch2);
      co_await expect_bytes(s, "0A 0200000000000000 0200000000000000 2f61 0200000000000000 2f62");
      co_await write_all(s, hex("0100000000000000 31 0100000000000000 32"));
    };
    run(server(), client(WireDialect::kTorch2));
  }
  SECTION("1.13: one GET per key, pipelined") {
    auto server = [&]() -> asio::awaitable<void> {
      auto s = co_await accept(WireDialect::kTorch113);
      co_await expect_bytes(s, ("02 0200000000000000 2f61 02 0200000000000000 2f62"));
      co_await write_all(s, hex("0100000000000000 31 0100000000000000 32"));
    };
    run(server(), client(WireDialect::kTorch113));
  }
}

TEST_CASE_METHOD(WireTest, "a 2.x wait past its deadline sends CANCEL_WAIT and raises a timeout",
                 "[client]") {
  auto server = [&]() -> asio::awaitable<void> {
    auto s = co_await accept(WireDialect::kTorch2);
    co_await expect_bytes(s, "06 0100000000000000 0600000000000000 2f6e6f6b6579");
    co_await expect_bytes(s, "0C");  // nothing answered the WAIT: CANCEL_WAIT
    co_await write_all(s, hex("01"));
    co_await expect_bytes(s, "07");  // the connection is still in sync
    co_await write_all(s, hex("0000000000000000"));
  };
  auto client = [&]() -> asio::awaitable<void> {
    auto c = co_await connect(WireDialect::kTorch2);
    std::vector<std::string> keys{"/nokey"};
    const auto message = co_await thrown<TimeoutError>(c->wait(keys, 50ms));
    CHECK(message == "store wait(/nokey) timed out after 50ms at " + c->address());
    const auto n = co_await c->num_keys();
    CHECK(n == 0);
  };
  run(server(), client());
}

TEST_CASE_METHOD(WireTest, "a 2.x wait_for past its deadline cancels and answers false, in sync",
                 "[client]") {
  auto server = [&]() -> asio::awaitable<void> {
    auto s = co_await accept(WireDialect::kTorch2);
    co_await expect_bytes(s, "06 0100000000000000 0600000000000000 2f6e6f6b6579");
    co_await expect_bytes(s, "0C");
    co_await write_all(s, hex("01"));  // WAIT_CANCELED
    co_await expect_bytes(s, "06 0100000000000000 0200000000000000 2f6b");
    co_await write_all(s, hex("00"));  // STOP_WAITING: /k exists
  };
  auto client = [&]() -> asio::awaitable<void> {
    auto c = co_await connect(WireDialect::kTorch2);
    std::vector<std::string> missing{"/nokey"};
    const bool arrived = co_await c->wait_for(missing, 50ms);
    CHECK_FALSE(arrived);
    std::vector<std::string> present{"/k"};
    const bool exists = co_await c->wait_for(present, 5s);
    CHECK(exists);
  };
  run(server(), client());
}

TEST_CASE_METHOD(WireTest, "a wait whose keys arrive as it is cancelled returns", "[client]") {
  auto server = [&]() -> asio::awaitable<void> {
    auto s = co_await accept(WireDialect::kTorch2);
    co_await read_exact(s, 1 + 8 + 8 + 2);
    co_await expect_bytes(s, "0C");
    co_await write_all(s, hex("00 01"));  // STOP_WAITING raced the cancel, then WAIT_CANCELED
    co_await expect_bytes(s, "07");
    co_await write_all(s, hex("0100000000000000"));
  };
  auto client = [&]() -> asio::awaitable<void> {
    auto c = co_await connect(WireDialect::kTorch2);
    std::vector<std::string> keys{"/k"};
    co_await c->wait(keys, 20ms);
    const auto n = co_await c->num_keys();
    CHECK(n == 1);
  };
  run(server(), client());
}

TEST_CASE_METHOD(WireTest,
                 "a 1.13 wait past its deadline drops the connection and the next call reconnects",
                 "[client]") {
  auto server = [&]() -> asio::awaitable<void> {
    auto first = co_await accept(WireDialect::kTorch113);
    co_await read_exact(first, 1 + 8 + 8 + 2);
    // 1.13 has no CANCEL_WAIT: the client closes instead of leaving a stale wait behind.
    const bool eof = co_await read_until_eof(first);
    CHECK(eof);
    auto second = co_await accept(WireDialect::kTorch113);
    co_await expect_bytes(second, "06");
    co_await write_all(second, hex("0300000000000000"));
  };
  auto client = [&]() -> asio::awaitable<void> {
    auto c = co_await connect(WireDialect::kTorch113);
    std::vector<std::string> keys{"/k"};
    co_await thrown<TimeoutError>(c->wait(keys, 20ms));
    const auto n = co_await c->num_keys();
    CHECK(n == 3);
  };
  run(server(), client());
}

TEST_CASE_METHOD(
    WireTest, "a call cancelled by the caller closes the connection and the next call reconnects",
    "[client]") {
  auto server = [&]() -> asio::awaitable<void> {
    auto first = co_await accept(WireDialect::kTorch2);
    co_await expect_bytes(first, "06 0100000000000000 0200000000000000 2f6b");  // never answered
    const bool eof = co_await read_until_eof(first);
    CHECK(eof);
    auto second = co_await accept(WireDialect::kTorch2);
    co_await expect_bytes(second, "07");
    co_await write_all(second, hex("0400000000000000"));
  };
  auto client = [&]() -> asio::awaitable<void> {
    auto c = co_await connect(WireDialect::kTorch2);
    using namespace asio::experimental::awaitable_operators;
    asio::steady_timer give_up(co_await asio::this_coro::executor, 30ms);
    // The timer wins the race; the get is cancelled while it waits for STOP_WAITING.
    auto winner = co_await (c->get("/k") || give_up.async_wait(asio::use_awaitable));
    CHECK(winner.index() == 1);
    const auto n = co_await c->num_keys();
    CHECK(n == 4);
  };
  run(server(), client());
}

TEST_CASE_METHOD(WireTest, "concurrent calls on one client go out one at a time", "[client]") {
  auto server = [&]() -> asio::awaitable<void> {
    auto s = co_await accept(WireDialect::kTorch2);
    for (int i = 1; i <= 3; ++i) {
      // The next request only arrives after this reply: read the request, then check nothing
      // else is pending before answering.
      co_await read_exact(s, 1 + 8 + 2 + 8);
      asio::steady_timer settle(s.get_executor(), 20ms);
      co_await settle.async_wait(asio::use_awaitable);
      CHECK(s.available() == 0);
      ByteVec reply(8, 0);
      reply[0] = static_cast<std::uint8_t>(i);
      co_await write_all(s, reply);
    }
  };
  auto client = [&]() -> asio::awaitable<void> {
    auto c = co_await connect(WireDialect::kTorch2);
    std::vector<std::int64_t> results;
    auto one = [&]() -> asio::awaitable<void> { results.push_back(co_await c->add("/n", 1)); };
    using namespace asio::experimental::awaitable_operators;
    co_await (one() && one() && one());
    std::vector<std::int64_t> expected{1, 2, 3};
    CHECK(results == expected);
  };
  run(server(), client());
}

// The scene of the lifetime tests: the client sends wait(/k), which the server never answers,
// queues add(/n, 1) behind it, and is destroyed; the server then reads until the connection
// closes.
struct DestroyedMidWait : WireTest {
  asio::awaitable<void> serve() {
    auto s = co_await accept(WireDialect::kTorch2);
    co_await expect_bytes(s, "06 0100000000000000 0200000000000000 2f6b");
    wait_sent.raise();
    const bool eof = co_await read_until_eof(s);
    CHECK(eof);
    closed.raise();
  }
  asio::awaitable<void> destroy_client() {
    auto c = co_await connect(WireDialect::kTorch2);
    std::vector<std::string> keys{"/k"};
    waiting = detach(io, c->wait(keys, 60s));  // its own deadline is far away
    queued = detach(io, c->add("/n", 1));      // waits for the connection
    const bool sent = co_await wait_sent.wait();
    REQUIRE(sent);
    c.reset();
  }
  std::string destroyed(const std::string& what) const {
    return "store " + what + " failed at 127.0.0.1:" + std::to_string(port) +
           ": the client was destroyed";
  }

  Signal wait_sent{io};
  Signal closed{io};
  std::shared_ptr<Detached> waiting;
  std::shared_ptr<Detached> queued;
};

TEST_CASE_METHOD(DestroyedMidWait, "calls in flight when the client is destroyed fail at once",
                 "[client][lifetime]") {
  auto client = [&]() -> asio::awaitable<void> {
    co_await destroy_client();
    const bool wait_ended = co_await waiting->ended.wait();
    const bool add_ended = co_await queued->ended.wait();
    REQUIRE(wait_ended);
    REQUIRE(add_ended);
    CHECK(io_error_message(waiting->error) == destroyed("wait(/k)"));
    // Not a reconnect: that would have left the add waiting for a handshake reply.
    CHECK(io_error_message(queued->error) == destroyed("add(/n, 1)"));
  };
  run(serve(), client());
}

TEST_CASE_METHOD(DestroyedMidWait, "destroying the client closes its connection at once",
                 "[client][lifetime]") {
  auto client = [&]() -> asio::awaitable<void> {
    co_await destroy_client();
    const bool seen = co_await closed.wait();  // not when the wait's deadline passes
    CHECK(seen);
    co_await waiting->ended.wait();
    co_await queued->ended.wait();
  };
  run(serve(), client());
}

}  // namespace
}  // namespace ddp::rdzv
