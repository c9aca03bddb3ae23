// The round engine's Coordination, one test list run against both adapters: StoreCoordination
// over a MemoryStore (c10d's TCPStore) and EtcdCoordination over a MemoryEtcd.

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "rendezvous/engine/store_coordination.hpp"
#include "rendezvous/etcd/etcd_coordination.hpp"
#include "tests/unit/rendezvous/etcd/memory_etcd.hpp"
#include "rendezvous/store/memory_store.hpp"
#include "tests/unit/rendezvous/etcd/run_now.hpp"

namespace {

namespace asio = boost::asio;
using ddp::rdzv::Bytes;
using ddp::rdzv::Coordination;
using ddp::rdzv::to_bytes;
using ddp::rdzv::test::finish_now;
using namespace std::chrono_literals;

// One adapter over its in-memory service, with the backend's spelling of keys and tallies.
struct CoordinationUnderTest {
  explicit CoordinationUnderTest(const std::string& backend) {
    if (backend == "c10d") {
      store = std::make_unique<ddp::rdzv::MemoryStore>(io.get_executor());
      coordination = std::make_unique<ddp::rdzv::StoreCoordination>(*store);
    } else {
      etcd = std::make_shared<ddp::rdzv::etcd::MemoryEtcd>(io.get_executor());
      lease = finish_now(io, etcd->lease_grant(5)).id;
      coordination = std::make_unique<ddp::rdzv::etcd::EtcdCoordination>(
          *etcd, [this] { return lease; });
      prefix = "/ddprun/job/";
    }
  }
  std::string key(const std::string& name) const { return prefix + name; }
  // A counter key for the store, a prefix of one key per node for etcd.
  std::string tally(const std::string& name) const {
    return etcd ? prefix + name + "/" : prefix + name;
  }

  asio::io_context io;
  std::unique_ptr<ddp::rdzv::MemoryStore> store;
  std::shared_ptr<ddp::rdzv::etcd::MemoryEtcd> etcd;
  std::int64_t lease = 0;
  std::unique_ptr<Coordination> coordination;
  std::string prefix;
};

}  // namespace

TEST_CASE("coordination: a tally counts each node's arrival, the arrival itself included",
          "[engine][coordination]") {
  CoordinationUnderTest c(GENERATE(std::string("c10d"), std::string("etcd")));
  Coordination& co = *c.coordination;
  CHECK(finish_now(c.io, co.count(c.tally("r0/finished"))) == 0);
  CHECK(finish_now(c.io, co.arrive(c.tally("r0/finished"), "a")) == 1);
  CHECK(finish_now(c.io, co.arrive(c.tally("r0/finished"), "b")) == 2);
  CHECK(finish_now(c.io, co.arrive(c.tally("r1/finished"), "a")) == 1);  // another tally
  CHECK(finish_now(c.io, co.count(c.tally("r0/finished"))) == 2);
  if (c.etcd) {
    // An arrival is bound to the node's lease: a lost node's arrival goes with it.
    finish_now(c.io, c.etcd->lease_revoke(c.lease, 1s));
    CHECK(finish_now(c.io, co.count(c.tally("r0/finished"))) == 0);
  }
}

TEST_CASE("coordination: of two creates of one key the first stands", "[engine][coordination]") {
  CoordinationUnderTest c(GENERATE(std::string("c10d"), std::string("etcd")));
  Coordination& co = *c.coordination;
  CHECK(finish_now(c.io, co.create(c.key("closed"), to_bytes("first"))) == to_bytes("first"));
  CHECK(finish_now(c.io, co.create(c.key("closed"), to_bytes("second"))) == to_bytes("first"));
}

TEST_CASE("coordination: put sets every pair and get reads them, absent keys as nullopt",
          "[engine][coordination]") {
  CoordinationUnderTest c(GENERATE(std::string("c10d"), std::string("etcd")));
  Coordination& co = *c.coordination;
  std::vector<std::pair<std::string, Bytes>> kvs;
  kvs.emplace_back(c.key("a"), to_bytes("1"));
  kvs.emplace_back(c.key("b"), to_bytes("2"));
  finish_now(c.io, co.put(std::move(kvs)));
  std::vector<std::string> keys{c.key("a"), c.key("missing"), c.key("b")};
  const auto values = finish_now(c.io, co.get(std::move(keys)));
  REQUIRE(values.size() == 3);
  CHECK(values[0] == to_bytes("1"));
  CHECK_FALSE(values[1]);
  CHECK(values[2] == to_bytes("2"));
}

TEST_CASE("coordination: wait_for returns once the key is set, or false at its timeout",
          "[engine][coordination]") {
  CoordinationUnderTest c(GENERATE(std::string("c10d"), std::string("etcd")));
  Coordination& co = *c.coordination;
  CHECK_FALSE(finish_now(c.io, co.wait_for(c.key("passed"), 20ms)));
  // Set 10 ms into a wait of up to 5 s.
  asio::co_spawn(
      c.io,
      [&]() -> asio::awaitable<void> {
        asio::steady_timer later(c.io, 10ms);
        co_await later.async_wait(asio::use_awaitable);
        std::vector<std::pair<std::string, Bytes>> kvs;
        kvs.emplace_back(c.key("passed"), to_bytes("1"));
        co_await co.put(std::move(kvs));
      },
      asio::detached);
  CHECK(finish_now(c.io, co.wait_for(c.key("passed"), 5s)));  // (a timeout would be false)
  CHECK(finish_now(c.io, co.wait_for(c.key("passed"), 0ms)));  // exists: at once
}
