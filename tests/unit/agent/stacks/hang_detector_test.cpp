// The hang rule: who is named, and who never is (slow but progressing, all equal, no record,
// another node's rank); the long waits nodes share through the store.
#include <catch2/catch.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include "agent/stacks/hang_detector.hpp"
#include "rendezvous/store_server/tcp_store_server.hpp"

using namespace ddp::agent;

namespace {

RankProgress rank_at(int rank, std::uint64_t seq, std::uint64_t completed, double idle_s,
                     const std::string& op = "all_reduce") {
  RankProgress r;
  r.rank = rank;
  r.local_rank = rank;
  r.pid = 100 + rank;
  ddp::ProgressRecord record;
  record.seq = seq;
  record.completed = completed;
  record.op = op;
  r.record = record;
  r.idle_s = idle_s;
  return r;
}

}  // namespace

TEST_CASE("a rank without progress while others wait in a later collective is named",
          "[hang]") {
  const auto verdict = judge_hang(
      {rank_at(0, 31, 29, 10.5), rank_at(1, 29, 29, 10.7), rank_at(2, 31, 29, 10.4)}, 10);
  REQUIRE(verdict);
  CHECK(verdict->lagging == std::vector<int>{1});
  CHECK(verdict->summary ==
        "hang: rank 1 made no progress while ranks 0,2 wait in all_reduce #31");
  REQUIRE(verdict->lines.size() == 2);
  CHECK(verdict->lines[0] ==
        "rank 1 (local_rank 1, pid 101): no progress for 10.7s; last collective all_reduce #29 "
        "(completed)");
  CHECK(verdict->lines[1] == "ranks 0,2 wait in all_reduce #31 for 10.5s");
  CHECK(verdict->idle_s == Approx(10.7));
}

TEST_CASE("a slow but progressing rank is never named", "[hang]") {
  SECTION("its record changed within the timeout") {
    CHECK_FALSE(judge_hang({rank_at(0, 31, 29, 10.5), rank_at(1, 29, 29, 9.9)}, 10));
  }
  SECTION("the others have not waited the whole timeout") {
    CHECK_FALSE(judge_hang({rank_at(0, 31, 29, 9.0), rank_at(1, 29, 29, 60.0)}, 10));
  }
}

TEST_CASE("ranks that all wait in the same collective name nobody", "[hang]") {
  CHECK_FALSE(judge_hang({rank_at(0, 31, 30, 100), rank_at(1, 31, 30, 100)}, 10));
}

TEST_CASE("ranks without a progress record are judged only by their process state", "[hang]") {
  RankProgress python;
  python.rank = 1;
  python.local_rank = 1;
  python.pid = 7;
  CHECK_FALSE(judge_hang({rank_at(0, 5, 4, 100), python}, 10));
  python.stopped_s = 12.5;
  const auto verdict = judge_hang({rank_at(0, 5, 4, 100), python}, 10);
  REQUIRE(verdict);
  CHECK(verdict->lagging == std::vector<int>{1});
  CHECK(verdict->lines.at(0) == "rank 1 (local_rank 1, pid 7): stopped (state T) for 12.5s");
  CHECK(verdict->summary == "hang: rank 1 stopped");
}

TEST_CASE("a rank stuck in an earlier collective is named too", "[hang]") {
  const auto verdict = judge_hang({rank_at(0, 8, 7, 20), rank_at(1, 7, 6, 20)}, 10);
  REQUIRE(verdict);
  CHECK(verdict->lagging == std::vector<int>{1});
  CHECK(verdict->lines.at(0).find("last collective all_reduce #7 (waiting in it)") !=
        std::string::npos);
}

TEST_CASE("ranks of other nodes wait, and are never named", "[hang]") {
  RankProgress remote = rank_at(0, 31, 30, 12);
  remote.remote = true;
  const auto verdict = judge_hang({remote, rank_at(1, 29, 29, 12)}, 10);
  REQUIRE(verdict);
  CHECK(verdict->lagging == std::vector<int>{1});
  CHECK(verdict->summary == "hang: rank 1 made no progress while rank 0 waits in all_reduce #31");
  // A remote rank with a lower sequence number is its own node's to name.
  RankProgress behind = rank_at(2, 20, 20, 50);
  behind.remote = true;
  behind.stopped_s = 50;
  CHECK_FALSE(judge_hang({behind, rank_at(1, 31, 30, 50)}, 10));
}

TEST_CASE("a published wait survives its encoding; other text reads as nothing", "[hang]") {
  const PeerWait wait{42, "barrier", {3, 4}, 1, 12.5};
  const auto back = PeerWait::decode(wait.encode());
  REQUIRE(back);
  CHECK(back->seq == 42);
  CHECK(back->op == "barrier");
  CHECK(back->ranks == std::vector<int>{3, 4});
  CHECK(back->node == 1);
  CHECK(back->waited_s == Approx(12.5));
  CHECK_FALSE(PeerWait::decode("{}"));
  CHECK_FALSE(PeerWait::decode("nope"));
  CHECK_FALSE(PeerWait::decode("{\"seq\": \"x\"}"));
}

TEST_CASE("a published wait has one byte form; absent fields read as defaults", "[hang]") {
  // Agents of one job may run different ddprun builds: the form is fixed (keys sorted).
  CHECK(PeerWait{42, "barrier", {3, 4}, 1, 12.5}.encode() ==
        R"({"node":1,"op":"barrier","ranks":[3,4],"seq":42,"version":1,"waited_s":12.5})");
  const auto bare = PeerWait::decode(R"({"seq":7})");
  REQUIRE(bare);
  CHECK(bare->seq == 7);
  CHECK(bare->op.empty());
  CHECK(bare->ranks.empty());
  CHECK(bare->node == 0);
  CHECK(bare->waited_s == 0);
}

TEST_CASE("the store keeps the highest published wait of a round", "[hang]") {
  boost::asio::io_context io;
  ddp::rdzv::TcpStoreServer server(io, "127.0.0.1", 0);
  server.start();
  auto peers = make_store_hang_peers("127.0.0.1", server.port(), "job", 2);
  std::vector<std::optional<PeerWait>> reads;
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        // (Named values: GCC 12 miscompiles braced lists inside co_await.)
        const PeerWait first{31, "all_reduce", {0}, 0, 10};
        const PeerWait lower{12, "barrier", {2}, 1, 10};
        const PeerWait higher{33, "all_reduce", {2}, 1, 11};
        reads.push_back(co_await peers->read());  // nothing yet
        co_await peers->publish(first);
        co_await peers->publish(lower);  // ignored
        reads.push_back(co_await peers->read());
        co_await peers->publish(higher);
        reads.push_back(co_await peers->read());
      },
      [&](std::exception_ptr e) {
        server.stop();
        io.stop();
        if (e) std::rethrow_exception(e);
      });
  io.run();
  REQUIRE(reads.size() == 3);
  CHECK_FALSE(reads[0]);
  REQUIRE(reads[1]);
  CHECK(reads[1]->seq == 31);
  REQUIRE(reads[2]);
  CHECK(reads[2]->seq == 33);
  CHECK(reads[2]->node == 1);
}
