// GroupStore::with_prefix: a sub-group view writes "world/group_1/<key>" on the root store (the
// bytes every peer of the job agrees on), joined by rdzv::prefixed_key.

#include <catch2/catch.hpp>
#include <chrono>

#include "collectives/memory_group_store.hpp"
#include "rendezvous/store/prefix_store.hpp"

using namespace std::chrono_literals;

TEST_CASE("prefixed_key joins with one slash and leaves an empty prefix out", "[group_store]") {
  CHECK(ddp::rdzv::prefixed_key("", "k") == "k");
  CHECK(ddp::rdzv::prefixed_key("world", "k") == "world/k");
  CHECK(ddp::rdzv::prefixed_key("/ddprun/r1", "lease") == "/ddprun/r1/lease");
}

TEST_CASE("nested views write world/group_N/<key> on the root store", "[group_store]") {
  ddp::coll::MemoryGroupStore root;
  auto world = root.with_prefix("world");
  auto group = world->with_prefix("group_1");
  group->set("addr_0", {1, 2});
  world->set("rank_3", {3});
  CHECK(root.check("world/group_1/addr_0"));
  CHECK(root.check("world/rank_3"));
  CHECK_FALSE(root.check("world/group_1/rank_3"));
  CHECK(root.get("world/group_1/addr_0", 1s) == ddp::coll::StoreBytes{1, 2});
  CHECK(group->get("addr_0", 1s) == ddp::coll::StoreBytes{1, 2});
  CHECK(group->describe() == "memory:world/group_1");
}
