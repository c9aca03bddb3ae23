// Our TcpStoreClient against our TcpStoreServer, in both dialects, on one io_context: every Store
// operation, a wait that times out (2.x cancels with CANCEL_WAIT; 1.13 just gives up) followed
// by more calls on the same connection, and a get released by another client's set.

#include "ddp/error.hpp"
#include "rendezvous/store/key_table.hpp"
#include "rendezvous/store/memory_store.hpp"
#include "rendezvous/store_client/tcp_store_client.hpp"
#include "rendezvous/store_server/tcp_store_server.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <catch2/catch.hpp>

using namespace ddp::rdzv;
using namespace std::chrono_literals;

namespace {

ConnectOptions options_for(WireDialect dialect) {
  ConnectOptions options;
  options.dialect = dialect;
  options.connect_timeout = 5s;
  options.call_timeout = 5s;
  return options;
}

// Every operation of one client. co_await never appears inside a Catch macro (GCC 12 evaluates
// it twice there).
asio::awaitable<void> exercise(std::uint16_t port, WireDialect dialect, TcpStoreServer& server) {
  auto client = co_await TcpStoreClient::connect("127.0.0.1", port, options_for(dialect));
  client->set_timeout(5s);
  co_await client->set("/k", to_bytes("v"));
  auto value = co_await client->get("/k");
  CHECK(to_string(value) == "v");
  auto sum = co_await client->add("/n", 5);
  CHECK(sum == 5);
  sum = co_await client->add("/n", -7);
  CHECK(sum == -2);
  auto swapped = co_await client->compare_set("/k", to_bytes("v"), to_bytes("w"));
  CHECK(to_string(swapped) == "w");
  auto missing = co_await client->compare_set("/none", to_bytes("e"), to_bytes("x"));
  CHECK(to_string(missing) == "e");
  std::vector<std::string> present{"/k", "/n"};
  auto all_there = co_await client->check(present);
  CHECK(all_there);

  std::vector<std::string> absent{"/absent"};
  bool timed_out = false;
  try {
    co_await client->wait(absent, 50ms);
  } catch (const ddp::TimeoutError&) {
    timed_out = true;
  }
  CHECK(timed_out);
  // The same connection keeps working after the abandoned wait.
  auto count = co_await client->num_keys();
  CHECK(count == 2);
  CHECK(server.store().table().waiter_count() == 0);

  co_await client->append("/log", to_bytes("ab"));
  co_await client->append("/log", to_bytes("cd"));
  std::vector<std::pair<std::string, Bytes>> pairs{{"/m1", to_bytes("1")}, {"/m2", to_bytes("2")}};
  co_await client->multi_set(pairs);
  std::vector<std::string> wanted{"/m2", "/log"};
  auto values = co_await client->multi_get(wanted);
  REQUIRE(values.size() == 2);
  CHECK(to_string(values[0]) == "2");
  CHECK(to_string(values[1]) == "abcd");
  auto deleted = co_await client->delete_key("/k");
  CHECK(deleted);
  deleted = co_await client->delete_key("/k");
  CHECK_FALSE(deleted);

  Bytes big(4 << 20);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<std::uint8_t>(i * 13);
  co_await client->set("/big", big);
  auto back = co_await client->get("/big");
  CHECK(back == big);

  // A get parked on the server, released by a second client.
  auto other = co_await TcpStoreClient::connect("127.0.0.1", port, options_for(dialect));
  asio::steady_timer later(co_await asio::this_coro::executor, 30ms);
  auto executor = co_await asio::this_coro::executor;
  asio::co_spawn(executor, [&]() -> asio::awaitable<void> {
    co_await later.async_wait(asio::use_awaitable);
    co_await other->set("/late", to_bytes("L"));
  }, asio::detached);
  auto late = co_await client->get("/late");
  CHECK(to_string(late) == "L");
}

void run_both(WireDialect dialect) {
  asio::io_context io;
  TcpStoreServer server(io, "127.0.0.1", 0);
  server.start();
  bool finished = false;
  std::exception_ptr error;
  asio::co_spawn(io, exercise(server.port(), dialect, server), [&](std::exception_ptr e) {
    finished = true;
    error = e;
    server.stop();
    io.stop();
  });
  io.run_for(30s);
  REQUIRE(finished);
  if (error) std::rethrow_exception(error);
}

}  // namespace

TEST_CASE("TcpStoreClient in the 2.x dialect against TcpStoreServer") {
  run_both(WireDialect::kTorch2);
}

TEST_CASE("TcpStoreClient in the 1.13 dialect against TcpStoreServer") {
  run_both(WireDialect::kTorch113);
}
