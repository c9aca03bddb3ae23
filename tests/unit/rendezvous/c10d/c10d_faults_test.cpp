// Node loss on one io_context: a node "dies" when its C10dRendezvous is destroyed mid-round (its
// heartbeats stop, as when its agent is SIGKILLed).

#include <catch2/catch.hpp>

#include <set>

#include "c10d_test_util.hpp"
#include "ddp/error.hpp"
#include "rendezvous/c10d/c10d_keys.hpp"
#include "rendezvous/store/key_table.hpp"

using namespace ddp::rdzv;
using namespace ddp::rdzv::test;

TEST_CASE("a node that stops heartbeating is lost and the survivors re-form at once", "[c10d]") {
  C10dSettings s = fast_settings(2, 3);
  s.last_call_timeout = 60s;  // rounds close at max, then at the size the change log predicts
  Cluster c(s);
  for (int i = 0; i < 3; ++i) c.add_node();
  REQUIRE(all_done(c.next_round({0, 1, 2})));

  auto w0 = spawn(c.io, c.nodes[0]->watch_round());
  auto w1 = spawn(c.io, c.nodes[1]->watch_round());
  c.nodes[2].reset();  // killed
  REQUIRE(run_until(c.io, [&] { return w0->done && w1->done; }));
  CHECK(w0->get().change == RoundChange::kNodeLost);
  CHECK(w1->get().change == RoundChange::kNodeLost);
  CHECK_THAT(w0->get().detail, Catch::Contains("n2"));

  auto next = c.next_round({0, 1});
  REQUIRE(all_done(next));
  std::set<int> ranks;
  for (const auto& o : next) {
    CHECK(o->get().group_world_size == 2);
    CHECK(o->get().restart_count == 0);  // losing a node spends no restart
    ranks.insert(o->get().group_rank);
  }
  CHECK(ranks == std::set<int>{0, 1});
}

TEST_CASE("losing nodes below the minimum fails naming the lost node", "[c10d]") {
  Cluster c(fast_settings(3, 3));
  for (int i = 0; i < 3; ++i) c.add_node();
  REQUIRE(all_done(c.next_round({0, 1, 2})));
  auto w0 = spawn(c.io, c.nodes[0]->watch_round());
  auto w1 = spawn(c.io, c.nodes[1]->watch_round());
  c.nodes[2].reset();
  REQUIRE(run_until(c.io, [&] { return w0->done && w1->done; }));
  auto next = c.next_round({0, 1});
  REQUIRE(all_done(next));
  for (const auto& o : next) {
    CHECK_THROWS_AS(o->get(), ddp::RendezvousClosedError);
    CHECK_THAT(o->error_text(), Catch::Contains("n2") && Catch::Contains("min is 3"));
  }
}

TEST_CASE("a node arriving at a full round stands by and fills the next free slot", "[c10d]") {
  C10dSettings s = fast_settings(2, 2);
  Cluster c(s);
  for (int i = 0; i < 3; ++i) c.add_node();
  REQUIRE(all_done(c.next_round({0, 1})));
  auto w0 = spawn(c.io, c.nodes[0]->watch_round());
  auto w1 = spawn(c.io, c.nodes[1]->watch_round());
  auto standby = spawn(c.io, c.nodes[2]->next_round(1));
  run_until(c.io, [&] { return w0->done || w1->done || standby->done; }, 300ms);
  CHECK_FALSE(w0->done);  // a full job is not restarted for a spare node
  CHECK_FALSE(standby->done);

  c.nodes[1].reset();
  REQUIRE(run_until(c.io, [&] { return w0->done; }));
  CHECK(w0->get().change == RoundChange::kNodeLost);
  auto next = c.next_round({0});
  REQUIRE(all_done(next));
  REQUIRE(run_until(c.io, [&] { return standby->done; }));
  CHECK(next[0]->get().group_world_size == 2);
  CHECK(standby->get().group_world_size == 2);
  CHECK(standby->get().round == 1);
  w1.reset();
}

TEST_CASE("a node slow to leave an ending round does not declare the others lost", "[c10d]") {
  C10dSettings s = fast_settings(2, 4);
  s.last_call_timeout = 60s;  // every round must close by max or by the predicted size
  Cluster c(s);
  for (int i = 0; i < 4; ++i) c.add_node();
  REQUIRE(all_done(c.next_round({0, 1, 2, 3})));
  auto w1 = spawn(c.io, c.nodes[1]->watch_round());
  c.nodes[3].reset();  // lost
  REQUIRE(run_until(c.io, [&] { return w1->done; }));
  CHECK(w1->get().change == RoundChange::kNodeLost);
  // Nodes 0 and 2 leave at once (their heartbeats stop); node 1 takes its time, longer than the
  // loss threshold, and must not count them as lost too.
  auto fast = std::vector<std::shared_ptr<Outcome<RendezvousInfo>>>{
      spawn(c.io, c.nodes[0]->next_round(1)), spawn(c.io, c.nodes[2]->next_round(1))};
  run_until(c.io, [] { return false; }, 400ms);
  auto slow = spawn(c.io, c.nodes[1]->next_round(1));
  REQUIRE(run_until(c.io, [&] { return all_done(fast) && slow->done; }));
  for (const auto& o : {fast[0], fast[1], slow}) {
    CHECK(o->get().round == 1);
    CHECK(o->get().group_world_size == 3);
  }
}

TEST_CASE("issue 16: a node lost between rounds is not waited for until the last call",
          "[c10d][loss]") {
  C10dSettings s = fast_settings(2, 3);
  s.last_call_timeout = 60s;
  Cluster c(s);
  for (int i = 0; i < 3; ++i) c.add_node();
  REQUIRE(all_done(c.next_round({0, 1, 2})));
  // Nodes 0 and 1 go to the next round expecting all three; node 2 dies before it joins, and
  // only then does its lease say so, in the round the others have left.
  std::vector<std::shared_ptr<Outcome<RendezvousInfo>>> next;
  for (int i : {0, 1}) next.push_back(spawn(c.io, c.nodes[i]->next_round(1)));
  run_for(c.io, 100ms);
  REQUIRE_FALSE(all_done(next));
  c.nodes[2].reset();
  c.store.table().append("/ddprun/test/r0/change", lost_line("n2", "connection", "300"));
  REQUIRE(run_until(c.io, [&] { return all_done(next); }, 10s));  // not the 60 s last call
  for (const auto& o : next) {
    CHECK(o->get().group_world_size == 2);
    CHECK(o->get().restart_count == 0);
  }
}

TEST_CASE("a neighbour that has not beaten since it joined is lost only after join_timeout",
          "[c10d]") {
  // At 100,000 members the last members read their places long after the first started
  // watching: a neighbour whose heartbeat is still its join's "0" is not yet lost.
  C10dSettings s = fast_settings(1, 2);
  s.join_timeout = 1s;  // lost_after is 3 x 40 ms
  Cluster c(s);
  for (int i = 0; i < 2; ++i) c.add_node();
  REQUIRE(all_done(c.next_round({0, 1})));
  auto w0 = spawn(c.io, c.nodes[0]->watch_round());
  c.nodes[1].reset();  // as if it had joined and never started its monitor
  const auto reset_at = std::chrono::steady_clock::now();
  for (int index = 1; index <= 2; ++index) {  // node 1's join index (node 0 beats its own over it)
    auto beat = spawn(c.io, c.store.set("/ddprun/test/" + c10d_keys::heartbeat(0, index),
                                        to_bytes("0")));
    REQUIRE(run_until(c.io, [&] { return beat->done; }));
  }
  REQUIRE(run_until(c.io, [&] { return w0->done; }, 5s));
  CHECK(w0->get().change == RoundChange::kNodeLost);
  CHECK(std::chrono::steady_clock::now() - reset_at >= 900ms);  // not after lost_after (120 ms)
}

TEST_CASE("every member's heartbeat is read by exactly one other member, and few read",
          "[c10d]") {
  for (int size = 1; size <= 300; ++size) {
    std::vector<int> readers(static_cast<std::size_t>(size) + 1, 0);
    int reading = 0;
    for (int index = 1; index <= size; ++index) {
      const C10dWatched w = c10d_watched(index, size);
      if (w.count > 0) ++reading;
      for (int i = w.first; i < w.first + w.count; ++i) {
        REQUIRE(i >= 1);
        REQUIRE(i <= size);
        REQUIRE(i != index);
        ++readers[static_cast<std::size_t>(i)];
      }
    }
    for (int i = 1; i <= size; ++i) {
      INFO("size " << size << " index " << i);
      CHECK(readers[static_cast<std::size_t>(i)] == (size == 1 ? 0 : 1));
    }
    // One reader per group of up to kC10dWatchGroup members: the reads per period stay linear.
    CHECK(reading <= (size + kC10dWatchGroup - 1) / kC10dWatchGroup + 1);
  }
  CHECK(c10d_read_period(5s) == 2500ms);
  CHECK(c10d_read_period(40ms) == 50ms);
}

TEST_CASE("a silent member is lost wherever it sits in the heartbeat groups", "[c10d]") {
  // Seven members: groups of four and three join indices; readers and read members alike.
  const int victim = GENERATE(0, 2, 4, 6);
  C10dSettings s = fast_settings(6, 7);
  Cluster c(s);
  for (int i = 0; i < 7; ++i) c.add_node();
  REQUIRE(all_done(c.next_round({0, 1, 2, 3, 4, 5, 6})));
  std::vector<std::shared_ptr<Outcome<RoundEvent>>> watches;
  for (int i = 0; i < 7; ++i) {
    if (i != victim)
      watches.push_back(spawn(c.io, c.nodes[static_cast<std::size_t>(i)]->watch_round()));
  }
  c.nodes[static_cast<std::size_t>(victim)].reset();
  REQUIRE(run_until(c.io, [&] { return all_done(watches); }));
  for (const auto& w : watches) {
    CHECK(w->get().change == RoundChange::kNodeLost);
    CHECK(w->get().detail == "lost node(s): n" + std::to_string(victim));
  }
}

TEST_CASE("members whose process stalled past the heartbeat window do not blame each other",
          "[c10d]") {
  // A starved process (a loaded host; the simulator's shards at 100,000 members) runs its timers
  // late: the first read after a stall may find a heartbeat as it was before, on a clock that ran
  // on. Beats every 100 ms, reads every 50 ms, lost after 200 ms: before each stall, each member
  // has already read the other's last beat about every other time. A late read times silence
  // afresh.
  C10dSettings s = fast_settings(2, 2);
  s.keep_alive_interval = 100ms;
  s.keep_alive_max_attempt = 2;
  Cluster c(s);
  for (int i = 0; i < 2; ++i) c.add_node();
  REQUIRE(all_done(c.next_round({0, 1})));
  auto w0 = spawn(c.io, c.nodes[0]->watch_round());
  auto w1 = spawn(c.io, c.nodes[1]->watch_round());
  run_for(c.io, 200ms);
  for (int stall = 0; stall < 4 && !w0->done && !w1->done; ++stall) {
    bool stalled = false;
    asio::post(c.io, [&stalled] {  // the whole process stalls for more than the window
      const auto until = std::chrono::steady_clock::now() + 300ms;
      while (std::chrono::steady_clock::now() < until) {
      }
      stalled = true;
    });
    REQUIRE(run_until(c.io, [&] { return stalled; }));
    run_for(c.io, 130ms + std::chrono::milliseconds(17 * stall));  // shift the phase
  }
  CHECK_FALSE(w0->done);
  CHECK_FALSE(w1->done);
}


TEST_CASE("a running round costs the store about one call per member per keep-alive interval",
          "[c10d]") {
  // A heartbeat SET each, one MULTI_GET per group of 32 every half interval, and a wait on the
  // change log parked for the whole round: nothing polls the log.
  constexpr int kNodes = 64;
  C10dSettings s = fast_settings(kNodes, kNodes);
  s.keep_alive_interval = 100ms;
  Cluster c(s);
  CallCounter counter(c.store);
  std::vector<int> all;
  for (int i = 0; i < kNodes; ++i) {
    std::string name = std::to_string(i);  // (not "n" + ...: GCC 12 -O3 false -Wrestrict)
    name.insert(name.begin(), 'n');
    c.nodes.push_back(std::make_unique<C10dRendezvous>(c.io.get_executor(), counter, s,
                                                       C10dNode{"10.0.0.1", name, false}));
    c.nodes.back()->watch_changes_on(counter);
    all.push_back(i);
  }
  REQUIRE(all_done(c.next_round(all)));
  run_for(c.io, 200ms);  // every monitor started
  const std::int64_t before = counter.calls;
  const auto start = std::chrono::steady_clock::now();
  run_for(c.io, 1000ms);
  const double intervals = std::chrono::duration<double>(std::chrono::steady_clock::now() - start) /
                           s.keep_alive_interval;
  const double per_member_per_interval =
      static_cast<double>(counter.calls - before) / kNodes / intervals;
  INFO("calls per member per interval: " << per_member_per_interval);
  CHECK(per_member_per_interval > 0.3);  // the beats go out (fewer on a starved machine)
  CHECK(per_member_per_interval < 1.3);  // 1 + 2/32; polling the log made it 3
}
