// BlockingStore::with_prefix, as the collectives use it: a sub-group view writes
// "world/group_1/<key>" on the root store (the bytes every peer of the job agrees on), joined by
// rdzv::prefixed_key; threads that play ranks share one in-memory store.

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "ddp/error.hpp"
#include "rendezvous/store/prefix_store.hpp"
#include "rendezvous/store_client/blocking_store.hpp"

using namespace std::chrono_literals;

TEST_CASE("prefixed_key joins with one slash and leaves an empty prefix out", "[group_store]") {
  CHECK(ddp::rdzv::prefixed_key("", "k") == "k");
  CHECK(ddp::rdzv::prefixed_key("world", "k") == "world/k");
  CHECK(ddp::rdzv::prefixed_key("/ddprun/r1", "lease") == "/ddprun/r1/lease");
}

TEST_CASE("nested views write world/group_N/<key> on the root store", "[group_store]") {
  auto root = ddp::rdzv::BlockingStore::in_memory();
  auto world = root->with_prefix("world");
  auto group = world->with_prefix("group_1");
  group->set("addr_0", {1, 2});
  world->set("rank_3", {3});
  CHECK(root->check({"world/group_1/addr_0"}));
  CHECK(root->check({"world/rank_3"}));
  CHECK_FALSE(root->check({"world/group_1/rank_3"}));
  CHECK(root->get("world/group_1/addr_0", 1s) == ddp::rdzv::Bytes{1, 2});
  CHECK(group->get("addr_0", 1s) == ddp::rdzv::Bytes{1, 2});
  CHECK(group->describe() == "memory/world/group_1");
}

TEST_CASE("one thread's wait is woken by another thread's set on the same store",
          "[group_store]") {
  auto store = ddp::rdzv::BlockingStore::in_memory();
  auto view = store->with_prefix("world");
  std::thread setter([&] {
    // Waits for the reader's mark, so the set comes while the reader's get is parked.
    view->wait({"reader_waiting"}, 10s);
    view->set("addr_1", {7});
  });
  view->set("reader_waiting", {1});
  CHECK(view->get("addr_1", 10s) == ddp::rdzv::Bytes{7});
  setter.join();
}

TEST_CASE("a view's get names the prefixed key when it times out", "[group_store]") {
  auto group = ddp::rdzv::BlockingStore::in_memory()->with_prefix("world");
  CHECK_THROWS_AS(group->get("missing", 20ms), ddp::TimeoutError);
  CHECK_THROWS_WITH(group->get("missing", 20ms), Catch::Contains("world/missing"));
}
