// MemoryEtcd, the in-memory etcd the rendezvous scenarios run on: revisions, transactions,
// ranges, watches and leases behave as etcd's do for what the rendezvous relies on.

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include <exception>
#include <memory>
#include <optional>
#include <string>

#include "ddp/error.hpp"
#include "tests/unit/rendezvous/etcd/memory_etcd.hpp"
#include "tests/unit/rendezvous/etcd/run_now.hpp"

namespace {

namespace asio = boost::asio;
using namespace ddp::rdzv::etcd;
using namespace std::chrono_literals;
using ddp::rdzv::test::finish_now;

std::optional<WatchResponse> next_now(asio::io_context& io, KvWatch& watch) {
  return finish_now(io, watch.next(Clock::now()));
}

}  // namespace

TEST_CASE("memory etcd: a transaction's puts share one revision and its reads see them",
          "[etcd][memory_etcd]") {
  asio::io_context io;
  const auto etcd = std::make_shared<MemoryEtcd>(io.get_executor());
  CHECK(etcd->revision() == 1);
  TxnRequest join;
  join.success.push_back({"/j/r0/join/a", "A", 0});
  join.success.push_back({"/j/r0/join/b", "B", 0});
  join.success_reads.push_back(prefix_count("/j/r0/join/"));
  join.success_deletes.push_back("/j/none");  // absent: no write of its own
  const TxnResponse joined = finish_now(io, etcd->txn(std::move(join), "join"));
  CHECK(joined.succeeded);
  CHECK(joined.revision == 2);
  REQUIRE(joined.ranges.size() == 1);
  CHECK(joined.ranges[0].count == 2);

  SECTION("a create compare holds only while the key is absent") {
    TxnRequest header;
    header.compare.push_back({"/j/r0/assignment", Compare::Target::kCreate, 0, {}});
    header.success.push_back({"/j/r0/assignment", "first", 0});
    header.failure.push_back(one_key("/j/r0/assignment"));
    TxnRequest again = header;
    again.success[0].value = "second";
    CHECK(finish_now(io, etcd->txn(std::move(header), "close")).succeeded);
    const TxnResponse lost = finish_now(io, etcd->txn(std::move(again), "close"));
    CHECK_FALSE(lost.succeeded);
    REQUIRE(lost.ranges.size() == 1);
    CHECK(lost.ranges[0].kvs.at(0).value == "first");
    CHECK(etcd->revision() == 3);
  }
  SECTION("a mod compare guards a read-modify-write") {
    const RangeResponse a = finish_now(io, etcd->range(one_key("/j/r0/join/a")));
    TxnRequest stale;
    stale.compare.push_back({"/j/r0/join/a", Compare::Target::kMod, a.kvs.at(0).mod_revision, {}});
    stale.success.push_back({"/j/r0/join/a", "A2", 0});
    TxnRequest late = stale;
    CHECK(finish_now(io, etcd->txn(std::move(stale), "rmw")).succeeded);
    CHECK_FALSE(finish_now(io, etcd->txn(std::move(late), "rmw")).succeeded);
    const RangeResponse now = finish_now(io, etcd->range(one_key("/j/r0/join/a")));
    CHECK(now.kvs.at(0).value == "A2");
    CHECK(now.kvs.at(0).create_revision == 2);  // a put keeps the key's create revision
    CHECK(now.kvs.at(0).mod_revision == 3);
  }
}

TEST_CASE("memory etcd: ranges by create revision, limited, counted and in the past",
          "[etcd][memory_etcd]") {
  asio::io_context io;
  const auto etcd = std::make_shared<MemoryEtcd>(io.get_executor());
  // Keys whose names sort the other way round from their creation.
  finish_now(io, etcd->put({"/p/c", "1", 0}));  // revision 2
  finish_now(io, etcd->put({"/p/b", "2", 0}));  // 3
  finish_now(io, etcd->put({"/p/a", "3", 0}));  // 4
  finish_now(io, etcd->put({"/q", "4", 0}));    // 5: outside the prefix
  RangeRequest first_two;
  first_two.key = "/p/";
  first_two.range_end = prefix_end("/p/");
  first_two.limit = 2;
  first_two.sort_by_create = true;
  const RangeResponse got = finish_now(io, etcd->range(first_two));
  CHECK(got.count == 3);
  REQUIRE(got.kvs.size() == 2);
  CHECK(got.kvs[0].key == "/p/c");
  CHECK(got.kvs[1].key == "/p/b");
  CHECK(finish_now(io, etcd->range(prefix_count("/p/"))).kvs.empty());

  TxnRequest drop;
  drop.success_deletes.push_back("/p/b");
  finish_now(io, etcd->txn(std::move(drop), "delete"));  // revision 6
  RangeRequest then = prefix_count("/p/");
  then.revision = 4;
  CHECK(finish_now(io, etcd->range(then)).count == 3);
  CHECK(finish_now(io, etcd->range(prefix_count("/p/"))).count == 2);
  then.revision = 99;
  CHECK_THROWS_AS(finish_now(io, etcd->range(then)), ddp::IoError);
}

TEST_CASE("memory etcd: a watch replays from its start revision, then delivers each revision",
          "[etcd][memory_etcd]") {
  asio::io_context io;
  const auto etcd = std::make_shared<MemoryEtcd>(io.get_executor());
  finish_now(io, etcd->put({"/r0/a", "1", 0}));  // 2
  finish_now(io, etcd->put({"/r1/a", "1", 0}));  // 3: another prefix
  finish_now(io, etcd->put({"/r0/b", "1", 0}));  // 4
  const auto watch = etcd->watch("/r0/", prefix_end("/r0/"), 3, true);
  const auto replayed = next_now(io, *watch);
  REQUIRE(replayed);
  CHECK(replayed->revision == 4);
  REQUIRE(replayed->events.size() == 1);
  CHECK(replayed->events[0].kv.key == "/r0/b");
  CHECK_FALSE(next_now(io, *watch));  // nothing more yet: next() returns at its deadline

  TxnRequest swap;  // a put and a delete in one revision: one response
  swap.success.push_back({"/r0/c", "1", 0});
  swap.success_deletes.push_back("/r0/a");
  finish_now(io, etcd->txn(std::move(swap), "swap"));
  const auto both = next_now(io, *watch);
  REQUIRE(both);
  CHECK(both->revision == 5);
  REQUIRE(both->events.size() == 2);
  CHECK_FALSE(both->events[0].is_delete);
  CHECK(both->events[1].is_delete);
  REQUIRE(both->events[1].prev_kv);
  CHECK(both->events[1].prev_kv->create_revision == 2);

  watch->cancel();
  finish_now(io, etcd->put({"/r0/d", "1", 0}));
  CHECK_FALSE(finish_now(io, watch->next(Clock::time_point::max())));
}

TEST_CASE("memory etcd: a lease's keys go in one revision when it expires on the test's clock",
          "[etcd][memory_etcd]") {
  asio::io_context io;
  const auto etcd = std::make_shared<MemoryEtcd>(io.get_executor());
  const LeaseGrant a = finish_now(io, etcd->lease_grant(3));
  const LeaseGrant b = finish_now(io, etcd->lease_grant(3));
  CHECK(a.ttl == 3);
  finish_now(io, etcd->put({"/j/a", "1", a.id}));
  finish_now(io, etcd->put({"/j/a2", "1", a.id}));
  finish_now(io, etcd->put({"/j/b", "1", b.id}));
  CHECK_THROWS_AS(finish_now(io, etcd->put({"/j/x", "1", 0x51})), ddp::IoError);  // no such lease
  const auto watch = etcd->watch("/j/", prefix_end("/j/"), 0, true);

  etcd->advance(2s);
  CHECK(finish_now(io, etcd->lease_keepalive(b.id, 1s, 1s)) == 3);  // b now lives to 5 s
  etcd->advance(1s);  // a's TTL has passed since its grant
  CHECK_FALSE(etcd->has_lease(a.id));
  CHECK(etcd->has_lease(b.id));
  const auto gone = next_now(io, *watch);
  REQUIRE(gone);
  REQUIRE(gone->events.size() == 2);
  CHECK(gone->events[0].is_delete);
  CHECK(gone->events[1].is_delete);
  CHECK(finish_now(io, etcd->lease_keepalive(a.id, 1s, 1s)) == 0);  // gone for good

  finish_now(io, etcd->lease_revoke(b.id, 1s));
  CHECK(finish_now(io, etcd->range(prefix_count("/j/"))).count == 0);
  finish_now(io, etcd->lease_revoke(b.id, 1s));  // a second revoke is no error
}
