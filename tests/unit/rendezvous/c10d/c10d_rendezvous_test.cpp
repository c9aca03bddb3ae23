// The c10d protocol on one io_context over a MemoryStore: rounds, ranks, late nodes, restarts and
// the exit barrier (how a round forms and closes: round_scenarios_test.cpp, on every backend).

#include <algorithm>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <catch2/catch.hpp>
#include <set>

#include "c10d_test_util.hpp"
#include "ddp/error.hpp"
#include "rendezvous/c10d/c10d_keys.hpp"

using namespace ddp::rdzv;
using namespace ddp::rdzv::test;

TEST_CASE("four nodes get group ranks 0..3 exactly once and the store host gets rank 0", "[c10d]") {
  Cluster c(fast_settings(4, 4));
  c.add_node();
  c.add_node();
  c.add_node(/*host=*/true);
  c.add_node();
  const auto out = c.next_round({0, 1, 2, 3}, 2);
  REQUIRE(all_done(out));
  std::set<int> ranks;
  for (const auto& o : out) {
    const RendezvousInfo info = o->get();
    ranks.insert(info.group_rank);
    CHECK(info.group_world_size == 4);
    CHECK(info.world_size == 8);
    CHECK(info.rank_base == 2 * info.group_rank);
    CHECK(info.round == 0);
    CHECK(info.restart_count == 0);
    CHECK(info.run_id == "test");
    CHECK(info.master_addr == "10.0.0.2");  // the host's worker store of round 0
    CHECK(info.master_port == 1000);
  }
  CHECK(ranks == std::set<int>{0, 1, 2, 3});
  CHECK(out[2]->get().group_rank == 0);
}

// Size of the round-0 header that every node reads, after `nodes` nodes formed the round.
std::size_t header_bytes(int nodes) {
  Cluster c(fast_settings(nodes, nodes));
  std::vector<int> all;
  for (int i = 0; i < nodes; ++i) {
    c.add_node();
    all.push_back(i);
  }
  REQUIRE(all_done(c.next_round(all)));
  std::vector<int> ranks;  // one place per member
  for (int i = 1; i <= nodes; ++i) {
    auto place = spawn(c.io, c.store.get("/ddprun/test/" + c10d_keys::place(0, i)));
    REQUIRE(run_until(c.io, [&] { return place->done; }));
    ranks.push_back(decode_place(place->get(), "place").group_rank);
  }
  std::sort(ranks.begin(), ranks.end());
  for (int i = 0; i < nodes; ++i) CHECK(ranks[static_cast<std::size_t>(i)] == i);
  auto header = spawn(c.io, c.store.get("/ddprun/test/" + c10d_keys::assignment(0)));
  REQUIRE(run_until(c.io, [&] { return header->done; }));
  return header->get().size();
}

TEST_CASE("what every node reads of a round does not grow with the round", "[c10d]") {
  // Ten times the nodes: the header gains at most the digits of the larger sizes.
  CHECK(header_bytes(40) <= header_bytes(4) + 4);
}

TEST_CASE("issue 24: nodes waiting for a large round wake within the store's budget", "[c10d]") {
  // A wake-up is 4 requests: every 5 s up to 25,000 nodes, every 20 s at 100,000.
  CHECK(c10d_progress_period(5s, 4) == 5s);
  CHECK(c10d_progress_period(50ms, 4) == 50ms);
  CHECK(c10d_progress_period(5s, 25000) == 5s);
  CHECK(c10d_progress_period(5s, 100000) == 20s);
}

TEST_CASE("a late node makes running nodes restart into a bigger round", "[c10d]") {
  C10dSettings s = fast_settings(2, 3);
  Cluster c(s);
  for (int i = 0; i < 3; ++i) c.add_node();
  auto first = c.next_round({0, 1});
  REQUIRE(all_done(first));
  CHECK(first[0]->get().group_world_size == 2);

  auto w0 = spawn(c.io, c.nodes[0]->watch_round());
  auto w1 = spawn(c.io, c.nodes[1]->watch_round());
  auto late = spawn(c.io, c.nodes[2]->next_round(1));
  REQUIRE(run_until(c.io, [&] { return w0->done && w1->done; }));
  CHECK(w0->get().change == RoundChange::kNodeWaiting);
  CHECK(w1->get().change == RoundChange::kNodeWaiting);
  CHECK_THAT(w0->get().detail, Catch::Contains("n2"));

  auto again = c.next_round({0, 1});
  REQUIRE(all_done(again));
  REQUIRE(run_until(c.io, [&] { return late->done; }));
  again.push_back(late);
  std::set<int> ranks;
  for (const auto& o : again) {
    const RendezvousInfo info = o->get();
    CHECK(info.round == 1);
    CHECK(info.group_world_size == 3);
    CHECK(info.restart_count == 0);  // scale-up spends no restart
    ranks.insert(info.group_rank);
  }
  CHECK(ranks == std::set<int>{0, 1, 2});
}

TEST_CASE("a failure spends one job-wide restart per round whoever reports it", "[c10d]") {
  Cluster c(fast_settings(2, 2));
  c.add_node();
  c.add_node();
  REQUIRE(all_done(c.next_round({0, 1})));
  auto watch = spawn(c.io, c.nodes[1]->watch_round());
  auto r0 = spawn(c.io, c.nodes[0]->report_failure("local_rank 0 exit code 3"));
  auto r1 = spawn(c.io, c.nodes[1]->report_failure("local_rank 1 exit code 1"));
  REQUIRE(run_until(c.io, [&] { return r0->done && r1->done && watch->done; }));
  CHECK(r0->get() == 1);
  CHECK(r1->get() == 1);
  CHECK(watch->get().change == RoundChange::kPeerFailed);

  auto next = c.next_round({0, 1});
  REQUIRE(all_done(next));
  CHECK(next[0]->get().restart_count == 1);
  CHECK(next[1]->get().round == 1);

  auto again = spawn(c.io, c.nodes[1]->report_failure("again"));
  REQUIRE(run_until(c.io, [&] { return again->done; }));
  CHECK(again->get() == 2);
}

TEST_CASE("the exit barrier holds every node until the last one finishes", "[c10d]") {
  Cluster c(fast_settings(2, 2));
  c.add_node(/*host=*/true);
  c.add_node();
  REQUIRE(all_done(c.next_round({0, 1})));
  auto f0 = spawn(c.io, c.nodes[0]->finish(true));
  run_until(
      c.io, [&] { return f0->done; }, 300ms);
  CHECK_FALSE(f0->done);
  auto f1 = spawn(c.io, c.nodes[1]->finish(true));
  REQUIRE(run_until(c.io, [&] { return f0->done && f1->done; }));
  CHECK_FALSE(f0->error);
  CHECK_FALSE(f1->error);
  // The store host, which leaves last, closed the job alone: the other node left without touching
  // the store again (a host that had just gone would have failed that operation).
  auto log = spawn(c.io, c.store.get("/ddprun/test/" + c10d_keys::change(0)));
  REQUIRE(run_until(c.io, [&] { return log->done; }));
  const std::string text = to_string(log->get());
  std::size_t closed = 0;
  for (auto at = text.find("job finished"); at != std::string::npos;
       at = text.find("job finished", at + 1)) {
    ++closed;
  }
  CHECK(closed == 1);

  // The job is over: a node arriving now is told so.
  c.add_node();
  auto late = c.next_round({2});
  REQUIRE(all_done(late));
  CHECK_THROWS_AS(late[0]->get(), ddp::RendezvousClosedError);
  CHECK_THAT(late[0]->error_text(), Catch::Contains("job finished"));
}

TEST_CASE("a failed node short-circuits the exit barrier and closes the job", "[c10d]") {
  Cluster c(fast_settings(2, 2));
  c.add_node();
  c.add_node();
  REQUIRE(all_done(c.next_round({0, 1})));
  auto f0 = spawn(c.io, c.nodes[0]->finish(true));
  auto r1 = spawn(c.io, c.nodes[1]->report_failure("exit code 7"));
  REQUIRE(run_until(c.io, [&] { return r1->done; }));
  auto f1 = spawn(c.io, c.nodes[1]->finish(false));
  REQUIRE(run_until(c.io, [&] { return f0->done && f1->done; }));
  CHECK_FALSE(f0->error);
  auto next = c.next_round({0});
  REQUIRE(all_done(next));
  CHECK_THROWS_AS(next[0]->get(), ddp::RendezvousClosedError);
  CHECK_THAT(next[0]->error_text(), Catch::Contains("n1") && Catch::Contains("exit code 7"));
}

TEST_CASE("watch_round can be cancelled by the agent racing it", "[c10d]") {
  using namespace boost::asio::experimental::awaitable_operators;
  Cluster c(fast_settings(2, 2));
  c.add_node();
  c.add_node();
  REQUIRE(all_done(c.next_round({0, 1})));
  auto race = [&]() -> boost::asio::awaitable<int> {
    boost::asio::steady_timer t(c.io, 50ms);
    auto winner = co_await (c.nodes[0]->watch_round() || t.async_wait(boost::asio::use_awaitable));
    co_return static_cast<int>(winner.index());
  };
  auto out = spawn(c.io, race());
  REQUIRE(run_until(c.io, [&] { return out->done; }));
  CHECK(out->get() == 1);
  // The round is still healthy: both nodes can still see a later change.
  auto w = spawn(c.io, c.nodes[0]->watch_round());
  auto r = spawn(c.io, c.nodes[1]->report_failure("x"));
  REQUIRE(run_until(c.io, [&] { return w->done && r->done; }));
  CHECK(w->get().change == RoundChange::kPeerFailed);
}

TEST_CASE("the exit barrier wins the agent's race against watch_round", "[c10d]") {
  // As the agent does after its workers succeed: finish(true) || watch_round(). Passing the
  // barrier stops the round's monitor; that must not look like a round change.
  using namespace boost::asio::experimental::awaitable_operators;
  Cluster c(fast_settings(2, 2));
  c.add_node(/*host=*/true);
  c.add_node();
  REQUIRE(all_done(c.next_round({0, 1})));
  // The agent's branches return their exceptions as values, so a throwing branch wins too.
  auto watch = [](C10dRendezvous& node) -> boost::asio::awaitable<bool> {
    try {
      co_await node.watch_round();
    } catch (const std::exception&) {
    }
    co_return true;
  };
  auto race = [&](C10dRendezvous& node) -> boost::asio::awaitable<int> {
    auto winner = co_await (node.finish(true) || watch(node));
    co_return static_cast<int>(winner.index());
  };
  auto r0 = spawn(c.io, race(*c.nodes[0]));
  auto r1 = spawn(c.io, race(*c.nodes[1]));
  REQUIRE(run_until(c.io, [&] { return r0->done && r1->done; }));
  CHECK(r0->get() == 0);
  CHECK(r1->get() == 0);
}

TEST_CASE("a node waiting to join does not restart nodes in the exit barrier", "[c10d]") {
  Cluster c(fast_settings(2, 3));
  for (int i = 0; i < 3; ++i) c.add_node();
  REQUIRE(all_done(c.next_round({0, 1})));
  auto f0 = spawn(c.io, c.nodes[0]->finish(true));
  auto w0 = spawn(c.io, c.nodes[0]->watch_round());
  auto late = spawn(c.io, c.nodes[2]->next_round(1));
  run_until(
      c.io, [&] { return w0->done || f0->done; }, 300ms);
  CHECK_FALSE(w0->done);
  CHECK_FALSE(f0->done);
  auto f1 = spawn(c.io, c.nodes[1]->finish(true));
  REQUIRE(run_until(c.io, [&] { return f0->done && f1->done && late->done; }));
  CHECK_FALSE(w0->done);
  CHECK_THROWS_AS(late->get(), ddp::RendezvousClosedError);
}

TEST_CASE("a lost node does not hold the exit barrier", "[c10d]") {
  Cluster c(fast_settings(2, 3));
  c.add_node(/*host=*/true);
  c.add_node();
  c.add_node();
  REQUIRE(all_done(c.next_round({0, 1, 2})));
  auto f0 = spawn(c.io, c.nodes[0]->finish(true));
  auto f1 = spawn(c.io, c.nodes[1]->finish(true));
  c.nodes[2].reset();
  REQUIRE(run_until(c.io, [&] { return f0->done && f1->done; }));
  CHECK_FALSE(f0->error);
  CHECK_FALSE(f1->error);
}

TEST_CASE("a failing store host stays up until the others have read why", "[c10d]") {
  Cluster c(fast_settings(2, 2));
  c.add_node(/*host=*/true);
  c.add_node();
  REQUIRE(all_done(c.next_round({0, 1})));
  auto w1 = spawn(c.io, c.nodes[1]->watch_round());
  auto r0 = spawn(c.io, c.nodes[0]->report_failure("exit code 9"));
  REQUIRE(run_until(c.io, [&] { return r0->done && w1->done; }));
  auto f0 = spawn(c.io, c.nodes[0]->finish(false));
  run_until(
      c.io, [&] { return f0->done; }, 200ms);
  CHECK_FALSE(f0->done);
  auto next = c.next_round({1});
  REQUIRE(all_done(next));
  CHECK_THAT(next[0]->error_text(), Catch::Contains("exit code 9"));
  REQUIRE(run_until(c.io, [&] { return f0->done; }));
  CHECK_FALSE(f0->error);
}
