// MemoryStore: the Store interface in-process, on an io_context; waits park and time out.

#include "ddp/error.hpp"
#include "rendezvous/store/key_table.hpp"
#include "rendezvous/store/memory_store.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <catch2/catch.hpp>

using namespace ddp::rdzv;
using namespace std::chrono_literals;

namespace {

template <typename T>
T run(asio::io_context& io, asio::awaitable<T> work) {
  auto future = asio::co_spawn(io, std::move(work), asio::use_future);
  io.restart();
  io.run();
  return future.get();
}

asio::awaitable<void> set_after(MemoryStore& store, std::string key,
                                std::chrono::milliseconds delay) {
  asio::steady_timer timer(co_await asio::this_coro::executor, delay);
  co_await timer.async_wait(asio::use_awaitable);
  co_await store.set(std::move(key), to_bytes("late"));
}

}  // namespace

TEST_CASE("MemoryStore set, get, add, compare_set, check, delete, num_keys") {
  asio::io_context io;
  MemoryStore store(io.get_executor());
  // co_await never appears inside CHECK: GCC 12 evaluates it twice in Catch's macro.
  run(io, [&]() -> asio::awaitable<void> {
    co_await store.set("a", to_bytes("1"));
    auto r0 = co_await store.get("a");
    CHECK(to_string(r0) == "1");
    auto r1 = co_await store.add("n", 5);
    CHECK(r1 == 5);
    auto r2 = co_await store.add("n", -7);
    CHECK(r2 == -2);
    auto r3 = co_await store.get("n");
    CHECK(to_string(r3) == "-2");
    auto r4 = co_await store.compare_set("c", Bytes{}, to_bytes("x"));
    CHECK(to_string(r4) == "x");
    auto r5 = co_await store.compare_set("c", to_bytes("y"), to_bytes("z"));
    CHECK(to_string(r5) == "x");
    auto r6 = co_await store.compare_set("c", to_bytes("x"), to_bytes("z"));
    CHECK(to_string(r6) == "z");
    auto r7 = co_await store.compare_set("gone", to_bytes("e"), to_bytes("z"));
    CHECK(to_string(r7) == "e");
    // (named vectors: GCC 12 rejects braced lists inside co_await expressions)
    std::vector<std::string> present{"a", "n"};
    std::vector<std::string> partly{"a", "gone"};
    auto r8 = co_await store.check(present);
    CHECK(r8);
    auto r9 = co_await store.check(partly);
    CHECK_FALSE(r9);
    auto r10 = co_await store.num_keys();
    CHECK(r10 == 3);
    auto r11 = co_await store.delete_key("a");
    CHECK(r11);
    auto r12 = co_await store.delete_key("a");
    CHECK_FALSE(r12);
    co_await store.append("log", to_bytes("ab"));
    co_await store.append("log", to_bytes("cd"));
    std::vector<std::pair<std::string, Bytes>> pairs{{"m1", to_bytes("1")}, {"m2", to_bytes("2")}};
    co_await store.multi_set(pairs);
    std::vector<std::string> wanted{"m2", "log"};
    const auto values = co_await store.multi_get(wanted);
    CHECK(to_string(values.at(0)) == "2");
    CHECK(to_string(values.at(1)) == "abcd");
    const auto existing = co_await store.multi_get_existing(wanted);
    CHECK(existing == values);
  }());
}

TEST_CASE("MemoryStore get waits for a key set later") {
  asio::io_context io;
  MemoryStore store(io.get_executor());
  asio::co_spawn(io, set_after(store, "k", 20ms), asio::detached);
  CHECK(to_string(run(io, store.get("k"))) == "late");
  CHECK(store.table().waiter_count() == 0);
}

TEST_CASE("MemoryStore get waits for a key, never for a 2.x queue of the same name") {
  asio::io_context io;
  MemoryStore store(io.get_executor());
  // A client's QUEUE_PUSH on the agent's store: the key stays missing for in-process users (had
  // the queue counted, get() would find no value, wait again at once, and spin the loop).
  store.table().queue_push("k", to_bytes("queued"));
  asio::co_spawn(io, set_after(store, "k", 20ms), asio::detached);
  CHECK(to_string(run(io, store.get("k"))) == "late");
  CHECK(store.table().queue_length("k") == 1);
}

TEST_CASE("MemoryStore wait times out naming the missing keys and forgets the waiter") {
  asio::io_context io;
  MemoryStore store(io.get_executor());
  run(io, store.set("here", to_bytes("1")));
  CHECK_THROWS_MATCHES(
      run(io, store.wait({"here", "absent"}, 30ms)), ddp::TimeoutError,
      Catch::Message("store wait(absent) timed out after 30ms (in-process store)"));
  CHECK(store.table().waiter_count() == 0);
}

TEST_CASE("MemoryStore wait_for answers false on its deadline and true once the keys exist") {
  asio::io_context io;
  MemoryStore store(io.get_executor());
  CHECK_FALSE(run(io, store.wait_for({"late"}, 20ms)));
  CHECK(store.table().waiter_count() == 0);
  asio::co_spawn(io, set_after(store, "late", 20ms), asio::detached);
  CHECK(run(io, store.wait_for({"late"}, 5s)));
  CHECK(run(io, store.wait_for({"late"}, 0ms)));  // already there: no wait at all
}

TEST_CASE("MemoryStore add on text is an error naming the key") {
  asio::io_context io;
  MemoryStore store(io.get_executor());
  run(io, store.set("t", to_bytes("x1")));
  CHECK_THROWS_MATCHES(run(io, store.add("t", 1)), ddp::Error,
                       Catch::Message("add(t): the stored value is not a decimal integer"));
}
