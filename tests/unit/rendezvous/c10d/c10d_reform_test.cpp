// Re-forming after a loss from the plan in r<N+1>/size (c10d_reform.cpp): what is c10d's own
// (requests per survivor at 64 nodes, the store host's plan, a member carried over from the log
// of the round before, the spare counter). The scenarios both backends share, a newcomer, too few
// survivors, a finished member, are in tests/unit/rendezvous/etcd/round_scenarios_test.cpp.

#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "c10d_test_util.hpp"
#include "ddp/error.hpp"
#include "rendezvous/c10d/c10d_keys.hpp"
#include "rendezvous/store/key_table.hpp"

using namespace ddp::rdzv;
using namespace ddp::rdzv::test;

namespace {

const std::string kLog0 = "/ddprun/test/r0/change";

// "n<i>" (not "n" + ...: GCC 12 -O3 false -Wrestrict).
std::string node_name(int i) {
  std::string name = std::to_string(i);
  name.insert(name.begin(), 'n');
  return name;
}

// Node i's lost line in round 0 (as its lease would write it), from where it sat.
Bytes lost_in(const RendezvousInfo& info, const std::string& name, int local_world_size) {
  return lost_line(name, "connection", "300", LostMember{info.group_rank, local_world_size});
}

std::vector<std::shared_ptr<Outcome<RoundEvent>>> watch(Cluster& c, const std::vector<int>& who) {
  std::vector<std::shared_ptr<Outcome<RoundEvent>>> out;
  for (int i : who) out.push_back(spawn(c.io, c.nodes[i]->watch_round()));
  return out;
}

// Rounds close at max or at the size the change log predicts, never after the last call.
C10dSettings settings(int min_nodes, int max_nodes) {
  C10dSettings s = fast_settings(min_nodes, max_nodes);
  s.last_call_timeout = 60s;
  return s;
}

// `nodes` fresh nodes (n0 hosts the store when `host`), of which `members` form round 0.
std::vector<std::shared_ptr<Outcome<RendezvousInfo>>> form(Cluster& c, int nodes,
                                                            std::vector<int> members,
                                                            bool host = false) {
  for (int i = 0; i < nodes; ++i) c.add_node(host && i == 0);
  auto first = c.next_round(std::move(members));
  REQUIRE(all_done(first));
  return first;
}

// Nodes `dead` die in round 0 (`first`: its outcomes, node i at i) and their leases say so;
// returns once `survivors` saw it.
void lose(Cluster& c, const std::vector<std::shared_ptr<Outcome<RendezvousInfo>>>& first,
          const std::vector<int>& dead, const std::vector<int>& survivors) {
  auto watches = watch(c, survivors);
  for (int i : dead) {
    c.nodes[i].reset();
    c.store.table().append(kLog0, lost_in(first[i]->get(), node_name(i), 1));
  }
  REQUIRE(run_until(c.io, [&] { return all_done(watches); }));
  for (const auto& w : watches) CHECK(w->get().change == RoundChange::kNodeLost);
}

// Every outcome is in `round` of `size` members, with ranks 0..size-1 once each.
void check_round(const std::vector<std::shared_ptr<Outcome<RendezvousInfo>>>& out, int round,
                 int size) {
  std::set<int> ranks;
  for (const auto& o : out) {
    CHECK(o->get().round == round);
    CHECK(o->get().group_world_size == size);
    ranks.insert(o->get().group_rank);
  }
  CHECK(ranks.size() == static_cast<std::size_t>(size));
  CHECK((ranks.empty() || *ranks.rbegin() == size - 1));
}

}  // namespace

TEST_CASE("survivors derive the next round from the last, in order, without re-joining",
          "[c10d][reform]") {
  constexpr int kNodes = 64;  // two heartbeat groups: 4 members read the log, 60 the plan
  C10dSettings s = settings(2, kNodes);
  s.keep_alive_interval = 10s;  // no beats or reads beside the re-form
  Cluster c(s);
  CallCounter counter(c.store);
  std::vector<int> all;
  for (int i = 0; i < kNodes; ++i) {
    c.nodes.push_back(std::make_unique<C10dRendezvous>(
        c.io.get_executor(), counter, s, C10dNode{"10.0.0.1", node_name(i), false}));
    all.push_back(i);
  }
  auto first = c.next_round(all, 2);
  REQUIRE(all_done(first));
  std::map<int, int> old_rank;  // node -> group rank in round 0
  for (int i = 0; i < kNodes; ++i) old_rank[i] = first[i]->get().group_rank;

  std::vector<int> survivors;
  for (int i = 0; i < kNodes; ++i) {
    if (i != 2 && i != 5 && i != 7) survivors.push_back(i);
  }
  run_for(c.io, 100ms);  // every monitor waits
  const std::int64_t before = counter.calls;
  auto watches = watch(c, survivors);
  for (int dead : {2, 5, 7}) {
    c.nodes[dead].reset();
    c.store.table().append(kLog0, lost_in(first[dead]->get(), node_name(dead), 2));
  }
  REQUIRE(run_until(c.io, [&] { return all_done(watches); }));
  for (const auto& w : watches) {
    CHECK(w->get().change == RoundChange::kNodeLost);
    CHECK_THAT(w->get().detail, Catch::Contains("n5"));  // also where only the plan said so
  }
  auto next = c.next_round(survivors, 2);
  REQUIRE(all_done(next));
  const double calls_each =
      static_cast<double>(counter.calls - before) / static_cast<double>(survivors.size());
  INFO("store calls per survivor from the loss to its place: " << calls_each);
  // Most read the plan, write one MULTI_SET (with the first beat) and wait on the next plan; the
  // 4 that read the log also count the spares and the finished and propose; the winner writes
  // the header and latest. A full re-join makes 11.
  CHECK(calls_each <= 3.5);

  // The survivors keep their order; rank bases follow the lost members' workers.
  std::vector<std::pair<int, int>> by_old;  // (old rank, new rank)
  for (std::size_t k = 0; k < survivors.size(); ++k) {
    const RendezvousInfo info = next[k]->get();
    CHECK(info.round == 1);
    CHECK(info.group_world_size == kNodes - 3);
    CHECK(info.world_size == 2 * (kNodes - 3));
    CHECK(info.rank_base == 2 * info.group_rank);
    CHECK(info.restart_count == 0);
    by_old.emplace_back(old_rank[survivors[k]], info.group_rank);
  }
  std::sort(by_old.begin(), by_old.end());
  for (std::size_t k = 0; k < by_old.size(); ++k) CHECK(by_old[k].second == static_cast<int>(k));
  // Nobody wrote places or read descriptors for round 1: its header says it was derived.
  CHECK_FALSE(c.store.table().contains("/ddprun/test/r1/place/1"));
  const Bytes* header = c.store.table().find("/ddprun/test/r1/assignment");
  REQUIRE(header != nullptr);
  CHECK(decode_round_header(*header, "header").derived);
  CHECK(to_string(*c.store.table().find("/ddprun/test/latest")) == "1");
}

TEST_CASE("a silent member of a derived round is lost by its place there, and derived again",
          "[c10d][reform]") {
  Cluster c(settings(2, 4));
  auto first = form(c, 4, {0, 1, 2, 3});
  lose(c, first, {3}, {0, 1, 2});
  REQUIRE(all_done(c.next_round({0, 1, 2})));

  auto again = watch(c, {0, 2});
  c.nodes[1].reset();  // its heartbeat stops
  REQUIRE(run_until(c.io, [&] { return all_done(again); }));
  CHECK_THAT(again[0]->get().detail, Catch::Contains("n1"));
  auto third = c.next_round({0, 2});
  REQUIRE(all_done(third));
  check_round(third, 2, 2);
  // The heartbeat's line said where n1 sat, so round 2 was derived too.
  const Bytes* header = c.store.table().find("/ddprun/test/r2/assignment");
  REQUIRE(header != nullptr);
  CHECK(decode_round_header(*header, "header").derived);
}

TEST_CASE("a member that died between the rounds is carried into the derived round's log",
          "[c10d][reform]") {
  // Two losses race: the plan names the first; the second's lease speaks in round 0's log after
  // the survivors left it. Its reader in round 1 finds it there and the survivors derive again.
  Cluster c(settings(2, 4));
  auto first = form(c, 4, {0, 1, 2, 3});
  c.nodes[2].reset();  // dead, but nobody knows yet
  lose(c, first, {3}, {0, 1});
  auto next = c.next_round({0, 1});
  REQUIRE(all_done(next));
  CHECK(next[0]->get().group_world_size == 3);  // n2 is in the plan: nobody knew yet

  auto in_one = watch(c, {0, 1});
  c.store.table().append(kLog0, lost_in(first[2]->get(), "n2", 1));
  REQUIRE(run_until(c.io, [&] { return all_done(in_one); }));  // well before join_timeout
  CHECK(in_one[0]->get().change == RoundChange::kNodeLost);
  CHECK_THAT(in_one[0]->get().detail, Catch::Contains("n2"));
  auto third = c.next_round({0, 1});
  REQUIRE(all_done(third));
  check_round(third, 2, 2);
}

TEST_CASE("a spare standing by at a full round takes the freed slot in the same re-form",
          "[c10d][reform]") {
  Cluster c(settings(1, 3));
  auto first = form(c, 4, {0, 1, 2});
  auto spare = spawn(c.io, c.nodes[3]->next_round(1));
  REQUIRE(run_until(c.io, [&] { return c.store.table().contains("/ddprun/test/r0/standby"); }));
  lose(c, first, {2}, {0, 1});
  auto next = c.next_round({0, 1});
  REQUIRE(all_done(next));
  REQUIRE(run_until(c.io, [&] { return spare->done; }));
  next.push_back(spare);
  check_round(next, 1, 3);  // not a derived round 1 and the spare in round 2
}

TEST_CASE("with the store host a member, its plan carries its fresh worker store",
          "[c10d][reform]") {
  Cluster c(settings(2, 3));
  auto first = form(c, 3, {0, 1, 2}, true);  // n0's worker store of round r is on port 1000 + r
  lose(c, first, {2}, {0, 1});
  // The member that is not the host comes first: it waits for the host's plan.
  auto member = spawn(c.io, c.nodes[1]->next_round(1));
  run_for(c.io, 100ms);
  CHECK_FALSE(member->done);
  auto host = spawn(c.io, c.nodes[0]->next_round(1));
  REQUIRE(run_until(c.io, [&] { return member->done && host->done; }));
  CHECK(host->get().group_rank == 0);
  CHECK(member->get().group_rank == 1);
  for (const auto& o : {host, member}) {
    CHECK(o->get().round == 1);
    CHECK(o->get().master_port == 1001);
    CHECK(o->get().master_addr == "10.0.0.0");
  }
}
