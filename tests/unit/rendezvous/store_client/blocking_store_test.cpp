// BlockingStore: synchronous calls (run on the store's own loop thread) against a scripted server
// running on a thread of its own; the key prefix; deadlines and errors surface as exceptions.
#include "rendezvous/store_client/blocking_store.hpp"

#include <thread>

#include "ddp/error.hpp"
#include "tests/unit/rendezvous/store_client/scripted_server.hpp"

namespace ddp::rdzv {
namespace {

using namespace test;
using namespace std::chrono_literals;

// Runs a scripted server coroutine on its own thread and io_context.
class ServerThread {
 public:
  explicit ServerThread(std::function<asio::awaitable<void>(tcp::acceptor&)> script)
      : acceptor_(make_acceptor(io_)) {
    asio::co_spawn(io_, script(acceptor_), [this](std::exception_ptr e) { error_ = e; });
    thread_ = std::thread([this] { io_.run_for(20s); });
  }
  ~ServerThread() {
    if (thread_.joinable()) thread_.join();
  }
  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }
  void join() {
    thread_.join();
    if (error_) std::rethrow_exception(error_);
  }

 private:
  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::exception_ptr error_;
  std::thread thread_;
};

ConnectOptions options() {
  ConnectOptions o;
  o.connect_timeout = 2s;
  o.initial_backoff = 1ms;
  o.call_timeout = 2s;
  return o;
}

TEST_CASE("blocking store prefixes keys and returns each reply", "[blocking]") {
  ServerThread server([](tcp::acceptor& acceptor) -> asio::awaitable<void> {
    auto s = co_await acceptor.async_accept(asio::use_awaitable);
    co_await answer_handshake(s);
    co_await expect_bytes(s, "01 0300000000000000 702f6b 0100000000000000 76");
    co_await expect_bytes(s, "06 0100000000000000 0300000000000000 702f6b");
    co_await write_all(s, hex("00"));
    co_await expect_bytes(s, "03 0300000000000000 702f6b");
    co_await write_all(s, hex("0100000000000000 76"));
    co_await expect_bytes(s, "04 0300000000000000 702f6e 0200000000000000");
    co_await write_all(s, hex("0200000000000000"));
    co_await read_exact(s, 1 + 8 + 8 + 9);  // WAIT p/missing: left unanswered
    co_await expect_bytes(s, "0C");
    co_await write_all(s, hex("01"));
  });
  auto store = BlockingStore::connect("127.0.0.1", server.port(), options(), "p");
  CHECK(store->prefix() == "p");
  CHECK(store->address() == "127.0.0.1:" + std::to_string(server.port()));
  store->set("k", to_bytes("v"));
  CHECK(to_string(store->get("k")) == "v");
  CHECK(store->add("n", 2) == 2);
  CHECK_THROWS_WITH(store->wait({"missing"}, 30ms),
                    "store wait(p/missing) timed out after 30ms at 127.0.0.1:" +
                        std::to_string(server.port()));
  server.join();
}

TEST_CASE("blocking store connect to a closed port times out", "[blocking]") {
  // A port held bound but not listening: connections are refused, and no test running beside
  // this one can take the port over (a freed port could be listening again by connect time).
  asio::io_context io;
  tcp::socket held(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  const std::uint16_t port = held.local_endpoint().port();
  auto o = options();
  o.connect_timeout = 100ms;
  CHECK_THROWS_AS(BlockingStore::connect("127.0.0.1", port, o), TimeoutError);
}

TEST_CASE("blocking store connects to a host name as well as to a numeric address", "[blocking]") {
  // A numeric address is connected to directly; a name goes through the resolver.
  ServerThread server([](tcp::acceptor& acceptor) -> asio::awaitable<void> {
    for (int i = 0; i < 2; ++i) {
      auto s = co_await acceptor.async_accept(asio::use_awaitable);
      co_await answer_handshake(s);
      co_await expect_bytes(s, "07");  // GETNUMKEYS
      co_await write_all(s, hex("0700000000000000"));
    }
  });
  for (const std::string host : {"127.0.0.1", "localhost"}) {
    auto store = BlockingStore::connect(host, server.port(), options());
    CHECK(store->num_keys() == 7);
  }
  server.join();
}

TEST_CASE("blocking store set_timeout bounds the next call", "[blocking]") {
  ServerThread server([](tcp::acceptor& acceptor) -> asio::awaitable<void> {
    auto s = co_await acceptor.async_accept(asio::use_awaitable);
    co_await answer_handshake(s);
    co_await read_exact(s, 1);  // GETNUMKEYS, never answered
    const bool eof = co_await read_until_eof(s);
    CHECK(eof);
  });
  auto store = BlockingStore::connect("127.0.0.1", server.port(), options());
  store->set_timeout(50ms);
  CHECK(store->timeout() == 50ms);
  CHECK_THROWS_AS(store->num_keys(), TimeoutError);
  store.reset();
  server.join();
}

}  // namespace
}  // namespace ddp::rdzv
