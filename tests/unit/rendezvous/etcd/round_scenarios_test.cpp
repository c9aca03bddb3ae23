// The elastic rendezvous's scenarios, one test list run against both backends: c10d over a
// MemoryStore and etcd over a MemoryEtcd, every node on one io_context. Derived rounds (the
// survivors of a loss re-form from a plan, engine/round_plan.hpp) are told from full joins by
// their order: a derived round keeps the old one, a join takes the order of arrival. A node is
// killed as a SIGKILLed agent is: its rendezvous goes without a word; c10d finds it by its
// silent heartbeat, etcd by its lease running out on the fake's clock.

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <spdlog/sinks/ostream_sink.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/log.hpp"
#include "ddp/error.hpp"
#include "rendezvous/c10d/c10d_rendezvous.hpp"
#include "rendezvous/etcd/etcd_rendezvous.hpp"
#include "tests/unit/rendezvous/etcd/memory_etcd.hpp"
#include "rendezvous/store/memory_store.hpp"
#include "tests/unit/rendezvous/c10d/c10d_test_util.hpp"

namespace {

namespace asio = boost::asio;
using namespace ddp::rdzv;
using namespace ddp::rdzv::test;
using namespace std::chrono_literals;

// The nodes of one job on one backend.
class ScenarioNodes {
 public:
  ScenarioNodes(std::string backend, int min_nodes, int max_nodes) : backend_(std::move(backend)) {
    if (backend_ == "c10d") {
      c10d_ = fast_settings(min_nodes, max_nodes);
      c10d_.verdict_margin = 200ms;
      store_ = std::make_unique<MemoryStore>(io.get_executor());
    } else {
      etcd_.run_id = "test";
      etcd_.min_nodes = min_nodes;
      etcd_.max_nodes = max_nodes;
      etcd_.join_timeout = 5s;
      etcd_.last_call_timeout = 100ms;
      etcd_.progress_interval = 50ms;
      etcd_.verdict_margin = 200ms;
      etcd_.lease_ttl = 1s;
      fake_ = std::make_shared<etcd::MemoryEtcd>(io.get_executor());
    }
  }

  // Before the first add_node: how long a round may take to form, how often its progress shows
  // while it forms, and its last call (by default 5 s, 50 ms and 100 ms).
  void set_forming(std::chrono::milliseconds join_timeout,
                   std::chrono::milliseconds progress_interval,
                   std::chrono::milliseconds last_call = 100ms) {
    c10d_.join_timeout = etcd_.join_timeout = join_timeout;
    c10d_.progress_interval = etcd_.progress_interval = progress_interval;
    c10d_.last_call_timeout = etcd_.last_call_timeout = last_call;
  }

  // Adds node "n<i>", with a rank hint (--node_rank) when `rank_hint` >= 0.
  Rendezvous& add_node(int rank_hint = -1) {
    const std::string i = std::to_string(nodes_.size());
    if (store_) {
      nodes_.push_back(std::make_unique<C10dRendezvous>(
          io.get_executor(), *store_, c10d_, C10dNode{"10.0.0." + i, "n" + i, false, rank_hint}));
    } else {
      etcd::EtcdNode self{"10.0.0." + i, "n" + i};
      self.rank_hint = rank_hint;
      nodes_.push_back(
          std::make_unique<etcd::EtcdRendezvous>(io.get_executor(), fake_, etcd_, self, nullptr));
    }
    return *nodes_.back();
  }
  Rendezvous& node(int i) { return *nodes_.at(static_cast<std::size_t>(i)); }

  // Node i dies without a word. etcd: the test's clock then moves on in steps of 400 ms, with
  // 400 ms on the loop between them for the live nodes' keep-alives (every third of the 1 s TTL),
  // until the dead node's lease has run out.
  void kill(int i) {
    Rendezvous& dead = node(i);
    const std::int64_t lease =
        fake_ ? static_cast<etcd::EtcdRendezvous&>(dead).lease_id() : 0;
    nodes_.at(static_cast<std::size_t>(i)).reset();
    for (int step = 0; fake_ && fake_->has_lease(lease) && step < 10; ++step) {
      run_for(io, 400ms);
      fake_->advance(400ms);
    }
    if (fake_) REQUIRE_FALSE(fake_->has_lease(lease));
  }

  // The listed nodes enter next_round(1); runs until every one returns.
  std::vector<std::shared_ptr<Outcome<RendezvousInfo>>> next_round(const std::vector<int>& which) {
    std::vector<std::shared_ptr<Outcome<RendezvousInfo>>> out;
    for (int i : which) out.push_back(spawn(io, node(i).next_round(1)));
    run_until(io, [&] { return all_done(out); });
    return out;
  }

  asio::io_context io;

 private:
  std::string backend_;
  C10dSettings c10d_;
  etcd::EtcdSettings etcd_;
  std::unique_ptr<MemoryStore> store_;
  std::shared_ptr<etcd::MemoryEtcd> fake_;
  std::vector<std::unique_ptr<Rendezvous>> nodes_;
};

// Each node's group rank in `round`, by node: `which[k]` got round[k].
std::map<int, int> rank_of(const std::vector<int>& which,
                           const std::vector<std::shared_ptr<Outcome<RendezvousInfo>>>& round) {
  std::map<int, int> ranks;
  for (std::size_t k = 0; k < which.size(); ++k) ranks[which[k]] = round[k]->get().group_rank;
  return ranks;
}

// The ranks a derived round gives `survivors`: their old order (`before`), closed up.
std::map<int, int> closed_up(const std::map<int, int>& before, const std::vector<int>& survivors) {
  std::vector<std::pair<int, int>> order;
  for (int i : survivors) order.emplace_back(before.at(i), i);
  std::sort(order.begin(), order.end());
  std::map<int, int> ranks;
  for (std::size_t k = 0; k < order.size(); ++k) ranks[order[k].second] = static_cast<int>(k);
  return ranks;
}

std::set<int> group_ranks(const std::vector<std::shared_ptr<Outcome<RendezvousInfo>>>& round) {
  std::set<int> ranks;
  for (const auto& o : round) ranks.insert(o->get().group_rank);
  return ranks;
}

}  // namespace

TEST_CASE("scenario: three nodes get group ranks 0..2 once each and pass the exit barrier",
          "[engine][scenario]") {
  ScenarioNodes c(GENERATE(std::string("c10d"), std::string("etcd")), 3, 3);
  for (int i = 0; i < 3; ++i) c.add_node();
  const auto round = c.next_round({0, 1, 2});
  REQUIRE(all_done(round));
  CHECK(group_ranks(round) == std::set<int>{0, 1, 2});
  CHECK(round[0]->get().world_size == 3);
  auto f0 = spawn(c.io, c.node(0).finish(true));
  auto f1 = spawn(c.io, c.node(1).finish(true));
  run_for(c.io, 200ms);
  CHECK_FALSE(f0->done);  // the barrier holds them until the last one finishes
  auto f2 = spawn(c.io, c.node(2).finish(true));
  REQUIRE(run_until(c.io, [&] { return f0->done && f1->done && f2->done; }));
  CHECK_FALSE(f0->error);
  CHECK_FALSE(f2->error);
}

TEST_CASE("scenario: rank hints (--node_rank, a hostfile's order) order the members, then arrival",
          "[engine][scenario]") {
  ScenarioNodes c(GENERATE(std::string("c10d"), std::string("etcd")), 4, 4);
  c.add_node(2);
  c.add_node();  // no hint: after the hinted ones
  c.add_node(0);
  c.add_node(1);
  const std::vector<int> which{0, 1, 2, 3};
  std::vector<std::shared_ptr<Outcome<RendezvousInfo>>> round;
  for (int i : which) {  // one at a time, in this order, so that arrival differs from the hints
    round.push_back(spawn(c.io, c.node(i).next_round(1)));
    run_for(c.io, 20ms);
  }
  REQUIRE(run_until(c.io, [&] { return all_done(round); }));
  CHECK(rank_of(which, round) == std::map<int, int>{{2, 0}, {3, 1}, {0, 2}, {1, 3}});
}

TEST_CASE("scenario: the survivors of a lost node re-form without it, spending no restart",
          "[engine][scenario]") {
  ScenarioNodes c(GENERATE(std::string("c10d"), std::string("etcd")), 2, 3);
  for (int i = 0; i < 3; ++i) c.add_node();
  REQUIRE(all_done(c.next_round({0, 1, 2})));
  auto w0 = spawn(c.io, c.node(0).watch_round());
  auto w1 = spawn(c.io, c.node(1).watch_round());
  c.kill(2);
  REQUIRE(run_until(c.io, [&] { return w0->done && w1->done; }));
  CHECK(w0->get().change == RoundChange::kNodeLost);
  CHECK_THAT(w1->get().detail, Catch::Contains("n2"));
  const auto again = c.next_round({0, 1});
  REQUIRE(all_done(again));
  CHECK(group_ranks(again) == std::set<int>{0, 1});
  CHECK(again[0]->get().group_world_size == 2);
  CHECK(again[0]->get().restart_count == 0);
}

TEST_CASE("scenario: a lost node does not hold the exit barrier", "[engine][scenario]") {
  ScenarioNodes c(GENERATE(std::string("c10d"), std::string("etcd")), 2, 3);
  for (int i = 0; i < 3; ++i) c.add_node();
  REQUIRE(all_done(c.next_round({0, 1, 2})));
  auto f0 = spawn(c.io, c.node(0).finish(true));
  auto f1 = spawn(c.io, c.node(1).finish(true));
  c.kill(2);
  REQUIRE(run_until(c.io, [&] { return f0->done && f1->done; }));
  CHECK_FALSE(f0->error);
  CHECK_FALSE(f1->error);
}

TEST_CASE("scenario: a failure with every node alive is this node's own and spends one restart",
          "[engine][scenario]") {
  ScenarioNodes c(GENERATE(std::string("c10d"), std::string("etcd")), 2, 2);
  c.add_node();
  c.add_node();
  REQUIRE(all_done(c.next_round({0, 1})));
  auto w1 = spawn(c.io, c.node(1).watch_round());
  auto verdict = spawn(c.io, c.node(0).failure_verdict(std::chrono::steady_clock::now()));
  REQUIRE(run_until(c.io, [&] { return verdict->done; }));
  CHECK_FALSE(verdict->get());
  auto report = spawn(c.io, c.node(0).report_failure("local_rank 0 exited with 3"));
  REQUIRE(run_until(c.io, [&] { return report->done && w1->done; }));
  CHECK(report->get() == 1);
  CHECK(w1->get().change == RoundChange::kPeerFailed);
  // The peer's own failure in the same round finds the restart spent.
  auto verdict1 = spawn(c.io, c.node(1).failure_verdict(std::chrono::steady_clock::now()));
  REQUIRE(run_until(c.io, [&] { return verdict1->done; }));
  REQUIRE(verdict1->get());
  CHECK(verdict1->get()->change == RoundChange::kPeerFailed);
  const auto next = c.next_round({0, 1});
  REQUIRE(all_done(next));
  CHECK(next[0]->get().restart_count == 1);
  CHECK(next[1]->get().round == 1);
}

TEST_CASE("scenario: a loss that leaves fewer than MIN nodes closes the job",
          "[engine][scenario]") {
  ScenarioNodes c(GENERATE(std::string("c10d"), std::string("etcd")), 3, 3);
  for (int i = 0; i < 3; ++i) c.add_node();
  REQUIRE(all_done(c.next_round({0, 1, 2})));
  auto w0 = spawn(c.io, c.node(0).watch_round());
  c.kill(2);
  REQUIRE(run_until(c.io, [&] { return w0->done; }));
  CHECK(w0->get().change == RoundChange::kNodeLost);
  const auto next = c.next_round({0, 1});
  REQUIRE(all_done(next));
  CHECK_THROWS_AS(next[0]->get(), ddp::RendezvousClosedError);
  CHECK_THAT(next[1]->error_text(), Catch::Contains("--nnodes min is 3"));
  CHECK_THAT(next[0]->error_text(), Catch::Contains("after losing n2"));
}

TEST_CASE("scenario: a newcomer at a round with room makes the members re-form with it",
          "[engine][scenario]") {
  ScenarioNodes c(GENERATE(std::string("c10d"), std::string("etcd")), 2, 3);
  for (int i = 0; i < 3; ++i) c.add_node();
  REQUIRE(all_done(c.next_round({0, 1})));  // closes at two after the last call
  auto w0 = spawn(c.io, c.node(0).watch_round());
  auto late = spawn(c.io, c.node(2).next_round(1));
  REQUIRE(run_until(c.io, [&] { return w0->done; }));
  CHECK(w0->get().change == RoundChange::kNodeWaiting);
  CHECK_THAT(w0->get().detail, Catch::Contains("n2"));
  auto again = c.next_round({0, 1});
  REQUIRE(run_until(c.io, [&] { return late->done; }));
  again.push_back(late);
  REQUIRE(all_done(again));
  CHECK(group_ranks(again) == std::set<int>{0, 1, 2});
  CHECK(late->get().restart_count == 0);  // scale-up spends no restart
}

TEST_CASE("scenario: a spare at a full round takes the slot a lost node frees",
          "[engine][scenario]") {
  ScenarioNodes c(GENERATE(std::string("c10d"), std::string("etcd")), 2, 2);
  for (int i = 0; i < 3; ++i) c.add_node();
  REQUIRE(all_done(c.next_round({0, 1})));
  auto w0 = spawn(c.io, c.node(0).watch_round());
  auto spare = spawn(c.io, c.node(2).next_round(1));
  run_for(c.io, 200ms);
  CHECK_FALSE(w0->done);  // a full round only learns that a spare stands by
  CHECK_FALSE(spare->done);
  c.kill(1);
  REQUIRE(run_until(c.io, [&] { return w0->done; }));
  CHECK(w0->get().change == RoundChange::kNodeLost);
  auto again = c.next_round({0});
  REQUIRE(run_until(c.io, [&] { return spare->done; }));
  again.push_back(spare);
  REQUIRE(all_done(again));
  CHECK(group_ranks(again) == std::set<int>{0, 1});
  CHECK(spare->get().group_world_size == 2);
}

TEST_CASE("scenario: the survivors of a loss derive the next round in their old order, "
          "whatever order they arrive in", "[engine][scenario][derived]") {
  ScenarioNodes c(GENERATE(std::string("c10d"), std::string("etcd")), 2, 4);
  for (int i = 0; i < 4; ++i) c.add_node();
  const std::vector<int> all{0, 1, 2, 3};
  const std::map<int, int> before = rank_of(all, c.next_round(all));
  auto w0 = spawn(c.io, c.node(0).watch_round());
  auto w3 = spawn(c.io, c.node(3).watch_round());
  c.kill(1);
  REQUIRE(run_until(c.io, [&] { return w0->done && w3->done; }));
  CHECK(w3->get().change == RoundChange::kNodeLost);
  // The last in the old order comes first: a full join would rank it first.
  std::vector<int> arrival{0, 2, 3};
  std::sort(arrival.begin(), arrival.end(),
            [&](int a, int b) { return before.at(a) > before.at(b); });
  std::vector<std::shared_ptr<Outcome<RendezvousInfo>>> next;
  for (int i : arrival) {
    next.push_back(spawn(c.io, c.node(i).next_round(1)));
    run_for(c.io, 20ms);
  }
  REQUIRE(run_until(c.io, [&] { return all_done(next); }));
  CHECK(rank_of(arrival, next) == closed_up(before, {0, 2, 3}));
  for (const auto& o : next) {
    CHECK(o->get().round == 1);
    CHECK(o->get().group_world_size == 3);
    CHECK(o->get().world_size == 3);
    CHECK(o->get().rank_base == o->get().group_rank);
    CHECK(o->get().restart_count == 0);
  }
}

TEST_CASE("scenario: a member lost in a derived round is found there, and the rest derive again",
          "[engine][scenario][derived]") {
  ScenarioNodes c(GENERATE(std::string("c10d"), std::string("etcd")), 1, 4);
  for (int i = 0; i < 4; ++i) c.add_node();
  const std::vector<int> all{0, 1, 2, 3};
  const std::map<int, int> first = rank_of(all, c.next_round(all));
  auto w0 = spawn(c.io, c.node(0).watch_round());
  c.kill(3);
  REQUIRE(run_until(c.io, [&] { return w0->done; }));
  const std::vector<int> three{0, 1, 2};
  const std::map<int, int> second = rank_of(three, c.next_round(three));
  CHECK(second == closed_up(first, three));

  auto w2 = spawn(c.io, c.node(2).watch_round());
  c.kill(1);
  REQUIRE(run_until(c.io, [&] { return w2->done; }));
  CHECK(w2->get().change == RoundChange::kNodeLost);
  CHECK_THAT(w2->get().detail, Catch::Contains("n1"));
  const std::vector<int> two{0, 2};
  const auto third = c.next_round(two);
  REQUIRE(all_done(third));
  CHECK(rank_of(two, third) == closed_up(second, two));
  CHECK(third[0]->get().round == 2);
  CHECK(third[1]->get().group_world_size == 2);
  CHECK(third[1]->get().restart_count == 0);
}

TEST_CASE("scenario: a node that arrives after a derived round is late there, and the members "
          "re-join with it", "[engine][scenario][derived]") {
  ScenarioNodes c(GENERATE(std::string("c10d"), std::string("etcd")), 2, 3);
  for (int i = 0; i < 4; ++i) c.add_node();
  REQUIRE(all_done(c.next_round({0, 1, 2})));
  auto w0 = spawn(c.io, c.node(0).watch_round());
  c.kill(2);
  REQUIRE(run_until(c.io, [&] { return w0->done; }));
  const auto derived = c.next_round({0, 1});
  REQUIRE(all_done(derived));
  CHECK(derived[0]->get().round == 1);

  auto grown = spawn(c.io, c.node(0).watch_round());
  auto newcomer = spawn(c.io, c.node(3).next_round(1));
  REQUIRE(run_until(c.io, [&] { return grown->done; }));
  CHECK(grown->get().change == RoundChange::kNodeWaiting);
  auto next = c.next_round({0, 1});
  REQUIRE(run_until(c.io, [&] { return newcomer->done; }));
  next.push_back(newcomer);
  REQUIRE(all_done(next));
  CHECK(group_ranks(next) == std::set<int>{0, 1, 2});
  CHECK(newcomer->get().round == 2);
  CHECK(newcomer->get().restart_count == 0);
}

TEST_CASE("scenario: a loss that leaves too few after a derived round closes the job",
          "[engine][scenario][derived]") {
  ScenarioNodes c(GENERATE(std::string("c10d"), std::string("etcd")), 2, 3);
  for (int i = 0; i < 3; ++i) c.add_node();
  REQUIRE(all_done(c.next_round({0, 1, 2})));
  auto w0 = spawn(c.io, c.node(0).watch_round());
  c.kill(2);
  REQUIRE(run_until(c.io, [&] { return w0->done; }));
  REQUIRE(c.next_round({0, 1})[0]->get().round == 1);
  auto lost = spawn(c.io, c.node(0).watch_round());
  c.kill(1);
  REQUIRE(run_until(c.io, [&] { return lost->done; }));
  CHECK(lost->get().change == RoundChange::kNodeLost);
  const auto last = c.next_round({0});
  REQUIRE(all_done(last));
  CHECK_THROWS_AS(last[0]->get(), ddp::RendezvousClosedError);
  CHECK_THAT(last[0]->error_text(), Catch::Contains("min is 2") && Catch::Contains("n1"));
}

TEST_CASE("scenario: a member whose workers finished does not re-form, and the others re-join "
          "without it", "[engine][scenario][derived]") {
  ScenarioNodes c(GENERATE(std::string("c10d"), std::string("etcd")), 1, 3);
  for (int i = 0; i < 3; ++i) c.add_node();
  REQUIRE(all_done(c.next_round({0, 1, 2})));
  auto barrier = spawn(c.io, c.node(0).finish(true));  // n0's workers succeeded
  run_for(c.io, 100ms);
  CHECK_FALSE(barrier->done);
  auto w1 = spawn(c.io, c.node(1).watch_round());
  c.kill(2);
  REQUIRE(run_until(c.io, [&] { return w1->done; }));
  const auto next = c.next_round({1});
  REQUIRE(all_done(next));
  CHECK(next[0]->get().round == 1);
  CHECK(next[0]->get().group_world_size == 1);  // a derived round would have held n0 too
}

TEST_CASE("scenario: a survivor that dies before it takes its place in a derived round is lost "
          "there too", "[engine][scenario][derived]") {
  ScenarioNodes c(GENERATE(std::string("c10d"), std::string("etcd")), 1, 4);
  for (int i = 0; i < 4; ++i) c.add_node();
  REQUIRE(all_done(c.next_round({0, 1, 2, 3})));
  auto w0 = spawn(c.io, c.node(0).watch_round());
  c.kill(3);
  REQUIRE(run_until(c.io, [&] { return w0->done; }));
  const auto derived = c.next_round({0, 1});  // n2 is in the plan, and never comes
  REQUIRE(all_done(derived));
  CHECK(derived[0]->get().group_world_size == 3);
  auto lost = spawn(c.io, c.node(0).watch_round());
  c.kill(2);
  REQUIRE(run_until(c.io, [&] { return lost->done; }));
  CHECK(lost->get().change == RoundChange::kNodeLost);
  const auto next = c.next_round({0, 1});
  REQUIRE(all_done(next));
  CHECK(next[0]->get().round == 2);
  CHECK(next[1]->get().group_world_size == 2);
}

// Forming a round by arrivals (engine/round_forming.hpp): one set of rules, every backend.

TEST_CASE("forming: a round closes at MAX nodes at once, without the last call",
          "[engine][scenario][forming]") {
  ScenarioNodes c(GENERATE(std::string("c10d"), std::string("etcd")), 2, 3);
  c.set_forming(5s, 50ms, 60s);
  for (int i = 0; i < 3; ++i) c.add_node();
  const auto round = c.next_round({0, 1, 2});  // (waiting for the last call: join_timeout)
  REQUIRE(all_done(round));
  CHECK(group_ranks(round) == std::set<int>{0, 1, 2});
}

TEST_CASE("forming: with MIN nodes joined the round closes at the last call with those that came",
          "[engine][scenario][forming]") {
  ScenarioNodes c(GENERATE(std::string("c10d"), std::string("etcd")), 2, 4);
  for (int i = 0; i < 3; ++i) c.add_node();
  const auto round = c.next_round({0, 1, 2});  // (the last call is 100 ms)
  REQUIRE(all_done(round));
  CHECK(group_ranks(round) == std::set<int>{0, 1, 2});
  CHECK(round[0]->get().world_size == 3);
}

TEST_CASE("forming: too few nodes time out with a message naming the backend and who joined",
          "[engine][scenario][forming]") {
  const std::string backend = GENERATE(std::string("c10d"), std::string("etcd"));
  ScenarioNodes c(backend, 3, 3);
  c.set_forming(300ms, 50ms);
  c.add_node();
  c.add_node();
  const auto out = c.next_round({0, 1});
  REQUIRE(all_done(out));
  for (const auto& o : out) {
    CHECK_THROWS_AS(o->get(), ddp::TimeoutError);
    CHECK_THAT(o->error_text(),
               Catch::Contains(backend + " rendezvous run=test round=0 timed out after") &&
                   Catch::Contains("2/3 nodes joined (--nnodes 3:3), 1 more needed; joined: ") &&
                   Catch::Contains("n0") && Catch::Contains("n1"));
  }
}

TEST_CASE("issue 21: a round waiting for nodes shows its progress at the warning level, never "
          "'up to 0 s'", "[engine][scenario][forming]") {
  ScenarioNodes c(GENERATE(std::string("c10d"), std::string("etcd")), 2, 2);
  c.set_forming(1300ms, 100ms);  // the last wake-ups have under a second left
  c.add_node();
  std::ostringstream captured;
  const auto logger = ddp::log::get("rdzv");
  const auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(captured);
  sink->set_level(spdlog::level::warn);  // what a default (quiet) run shows
  logger->sinks().push_back(sink);
  const auto out = c.next_round({0});
  logger->sinks().pop_back();
  REQUIRE(all_done(out));
  CHECK_THROWS_AS(out[0]->get(), ddp::TimeoutError);
  CHECK_THAT(captured.str(),
             Catch::Contains("1/2 nodes joined round 0 of run test; waiting up to"));
  CHECK_THAT(captured.str(), !Catch::Contains("waiting up to 0 s"));
}
