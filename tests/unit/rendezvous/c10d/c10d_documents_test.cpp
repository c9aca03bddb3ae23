// The c10d documents and change log: pure encoding, rank order and event parsing.

#include <catch2/catch.hpp>

#include "ddp/error.hpp"
#include "rendezvous/c10d/c10d_assignment.hpp"
#include "rendezvous/engine/round_changes.hpp"
#include "rendezvous/engine/derived_round.hpp"

using namespace ddp::rdzv;

TEST_CASE("assign_ranks puts the store host first and then arrival order", "[c10d]") {
  std::vector<std::pair<int, C10dNodeDesc>> nodes = {
      {1, {"a", "10.0.0.1", 2, false, "", 0}},
      {2, {"host", "10.0.0.2", 4, true, "10.0.0.2", 4711}},
      {3, {"c", "10.0.0.3", 1, false, "", 0}},
  };
  const C10dAssignment a = assign_ranks(5, 2, nodes, {"store", 29400});
  REQUIRE(a.members.size() == 3);
  CHECK(a.members[0].name == "host");
  CHECK(a.members[1].name == "a");
  CHECK(a.members[2].name == "c");
  CHECK(a.master_addr == "10.0.0.2");
  CHECK(a.master_port == 4711);
  CHECK(a.host_first);
  CHECK(a.members[0].join_index == 2);
  CHECK(a.members[2].join_index == 3);

  const C10dRoundHeader header = header_of(a);
  CHECK(header.size == 3);
  CHECK(header.world_size == 7);
  CHECK(header.host_first);
  const std::vector<C10dPlace> places = places_of(a);
  REQUIRE(places.size() == 3);
  const C10dPlace& place = places[1];  // "a": after the host's 4 workers
  CHECK(place.group_rank == 1);
  CHECK(place.rank_base == 4);
  CHECK(places[2].rank_base == 6);

  const RendezvousInfo info = info_for(header, place, "job");
  CHECK(info.group_rank == 1);
  CHECK(info.group_world_size == 3);
  CHECK(info.world_size == 7);
  CHECK(info.rank_base == 4);
  CHECK(info.restart_count == 2);
  CHECK(info.round == 5);
  CHECK(info.master_port == 4711);
}

TEST_CASE("a member alone in its round has rank 0 of its own workers", "[c10d]") {
  const C10dAssignment a =
      assign_ranks(0, 0, {{1, {"a", "10.0.0.1", 2, false, "", 0}}}, {"store", 29400});
  const std::vector<C10dPlace> places = places_of(a);
  REQUIRE(places.size() == 1);
  CHECK(places[0].group_rank == 0);
  CHECK(places[0].rank_base == 0);
  CHECK(header_of(a).world_size == 2);
}

TEST_CASE("without a hosting member the workers use the rendezvous store", "[c10d]") {
  const C10dAssignment a =
      assign_ranks(0, 0, {{1, {"a", "10.0.0.1", 1, false, "", 0}}}, {"store", 29400});
  CHECK(a.master_addr == "store");
  CHECK(a.master_port == 29400);
  CHECK_FALSE(a.host_first);
}

TEST_CASE("descriptors, round headers and places survive encoding", "[c10d]") {
  const C10dNodeDesc desc{"n_1", "::1", 8, true, "::1", 1234};
  const C10dNodeDesc back = decode_node_desc(encode(desc), "node");
  CHECK(back.name == "n_1");
  CHECK(back.addr == "::1");
  CHECK(back.local_world_size == 8);
  CHECK(back.is_host);
  CHECK(back.master_port == 1234);

  C10dRoundHeader h;
  h.round = 3;
  h.restart_count = 1;
  h.master_addr = "10.0.0.1";
  h.master_port = 99;
  h.host_first = true;
  h.size = 2;
  h.world_size = 4;
  const C10dRoundHeader g = decode_round_header(encode(h), "assignment");
  CHECK(g.round == 3);
  CHECK(g.host_first);
  CHECK(g.restart_count == 1);
  CHECK(g.master_addr == "10.0.0.1");
  CHECK(g.master_port == 99);
  CHECK(g.size == 2);
  CHECK(g.world_size == 4);

  const C10dPlace p{1, 3};
  const C10dPlace q = decode_place(encode(p), "place");
  CHECK(q.group_rank == 1);
  CHECK(q.rank_base == 3);
}

TEST_CASE("a document that is not ours is an error naming the key", "[c10d]") {
  CHECK_THROWS_WITH(decode_node_desc(to_bytes("garbage"), "r0/node/1"),
                    Catch::Contains("r0/node/1"));
  CHECK_THROWS_AS(decode_round_header(to_bytes("{\"size\":2}"), "a"), ddp::InternalError);
  CHECK_THROWS_WITH(decode_place(encode(C10dRoundHeader{}), "r0/place/1"),
                    Catch::Contains("r0/place/1"));
}

TEST_CASE("a document of another ddprun release is a setup error that says so", "[c10d]") {
  CHECK_THROWS_AS(decode_round_header(to_bytes("{\"version\":7}"), "r0/header"),
                  ddp::ConfigError);
  CHECK_THROWS_WITH(decode_round_header(to_bytes("{\"version\":7}"), "r0/header"),
                    Catch::Contains("another ddprun release (document version 7") &&
                        Catch::Contains("run the same ddprun on every node"));
}

TEST_CASE("the change log yields the event to act on and the next round's size", "[c10d]") {
  Bytes log;
  CHECK(parse_changes(log).empty());
  CHECK_FALSE(parse_changes(log).first_event().has_value());

  auto append = [&log](const Bytes& line) { log.insert(log.end(), line.begin(), line.end()); };
  append(waiting_line("late"));
  append(waiting_line("late"));
  RoundChanges c = parse_changes(log);
  CHECK(c.waiting == std::vector<std::string>{"late"});
  REQUIRE(c.first_event().has_value());
  CHECK(c.first_event()->change == RoundChange::kNodeWaiting);
  CHECK(c.expected_next(2, 4) == 3);

  append(lost_line("dead", "connection", "312"));
  append(lost_line("dead", "heartbeat", "2001"));  // the same node again: counted once
  c = parse_changes(log);
  CHECK(c.first_event()->change == RoundChange::kNodeLost);
  CHECK(c.first_event()->detail.find("dead") != std::string::npos);
  REQUIRE(c.first_event()->lost.size() == 1);
  CHECK(c.first_event()->lost[0].node == "dead");
  CHECK(c.first_event()->lost[0].detected_by == "connection");
  CHECK(c.first_event()->lost[0].after == std::chrono::milliseconds(312));
  CHECK(c.expected_next(2, 4) == 2);
  CHECK(c.expected_next(4, 4) == 4);

  append(failed_line("n1", "exit code 3\nsecond line"));
  c = parse_changes(log);
  CHECK(c.first_event()->change == RoundChange::kPeerFailed);
  CHECK(c.failed.front() == "n1 exit code 3 second line");

  append(to_bytes("closed half a li"));  // being appended: not read yet
  CHECK_FALSE(parse_changes(log).closed.has_value());
}

// What both backends' failure_verdict act on: the changes a worker failure may follow from.
TEST_CASE("a worker failure follows from a lost node first, then from a peer's failure",
          "[c10d]") {
  RoundChanges c;
  CHECK_FALSE(c.failure_cause().has_value());
  c.waiting.push_back("late");  // a waiting node explains no failure
  CHECK_FALSE(c.failure_cause().has_value());
  c.failed.push_back("n1 exit code 3");
  REQUIRE(c.failure_cause().has_value());
  CHECK(c.failure_cause()->change == RoundChange::kPeerFailed);
  c.lost.push_back("host");  // a loss wins: the failure it caused elsewhere spent nothing either
  CHECK(c.failure_cause()->change == RoundChange::kNodeLost);
  CHECK(c.failure_cause()->detail.find("host") != std::string::npos);

  RoundChanges closed;
  closed.closed = "workers failed on node n2";
  REQUIRE(closed.failure_cause().has_value());
  CHECK(closed.failure_cause()->change == RoundChange::kPeerFailed);
}

TEST_CASE("rank hints order the members after the store host, then arrival", "[c10d]") {
  std::vector<std::pair<int, C10dNodeDesc>> nodes = {
      {1, {"n3", "10.0.0.3", 1, false, "", 0, 3}},
      {2, {"late", "10.0.0.9", 1, false, "", 0, -1}},
      {3, {"n2", "10.0.0.2", 2, false, "", 0, 2}},
      {4, {"host", "10.0.0.1", 3, true, "10.0.0.1", 4711, 0}},
      {5, {"n1", "10.0.0.4", 1, false, "", 0, 1}},
  };
  const C10dAssignment a = assign_ranks(0, 0, nodes, {"store", 29400});
  std::vector<std::string> names;
  for (const C10dMember& m : a.members) names.push_back(m.name);
  CHECK(names == std::vector<std::string>{"host", "n1", "n2", "n3", "late"});
  CHECK(places_of(a)[3].rank_base == 6);  // 3 + 1 + 2 workers before n3

  const C10dNodeDesc back = decode_node_desc(encode(nodes[2].second), "desc");
  CHECK(back.rank_hint == 2);
  CHECK(decode_node_desc(encode(nodes[1].second), "desc").rank_hint == -1);
}

TEST_CASE("the round header and place documents keep their bytes", "[c10d]") {
  const C10dRoundHeader header{5, 2, "10.0.0.2", 4711, true, 3, 7};
  CHECK(to_string(encode(header)) ==
        R"({"derived":false,"host_first":true,"master_addr":"10.0.0.2","master_port":4711,)"
        R"("restart_count":2,"round":5,"size":3,"version":6,"world_size":7})");
  const C10dPlace place{1, 4};
  CHECK(to_string(encode(place)) == R"({"group_rank":1,"rank_base":4,"version":6})");
  const auto back = decode_round_header(encode(header), "header");
  CHECK(back.master_port == 4711);
  CHECK(back.world_size == 7);
  CHECK(decode_place(encode(place), "place").rank_base == 4);
  CHECK_THROWS_AS(decode_place(to_bytes(R"({"version":6,"group_rank":1})"), "place"),
                  ddp::InternalError);
}

TEST_CASE("a round is derived from lost lines that say where the lost sat, and only then",
          "[c10d][reform]") {
  const C10dRoundHeader prev{4, 1, "store", 29400, false, 5, 9};  // lws 1, 2, 3, 2, 1
  const auto log_of = [](std::vector<Bytes> lines) {
    Bytes log;
    for (const Bytes& l : lines) log.insert(log.end(), l.begin(), l.end());
    return parse_changes(log);
  };
  const Bytes lost_b = lost_line("b", "connection", "301", LostMember{1, 2});
  const Bytes lost_d = lost_line("d", "heartbeat", "15000", LostMember{3, 2});
  const auto derived = derivable(shape_of(prev), log_of({lost_d, lost_b, lost_b}), 2);
  REQUIRE(derived.has_value());
  REQUIRE(derived->lost.size() == 2);
  CHECK(derived->lost[0].group_rank == 1);  // sorted by rank
  CHECK(derivable(shape_of(prev), log_of({lost_b}), 2)->lost.size() == 1);

  // Members at ranks 0, 2 and 4 (lws 1, 3, 1; rank bases 0, 3, 8) become 0, 1, 2.
  const auto [header, place] = derive(prev, C10dPlace{2, 3}, *derived);
  CHECK(header.round == 5);
  CHECK(header.derived);
  CHECK(header.size == 3);
  CHECK(header.world_size == 5);
  CHECK(header.restart_count == 1);
  CHECK(header.master_addr == "store");
  CHECK(place.group_rank == 1);
  CHECK(place.rank_base == 1);
  CHECK(derive(prev, C10dPlace{4, 8}, *derived).second.rank_base == 4);
  CHECK(derive(prev, C10dPlace{0, 0}, *derived).second.group_rank == 0);
  CHECK_FALSE(derived_rank(*derived, 3).has_value());

  // Anything but losses with places, or too few left, re-joins in full.
  CHECK_FALSE(derivable(shape_of(prev), log_of({}), 2));
  CHECK_FALSE(derivable(shape_of(prev), log_of({lost_b, waiting_line("e")}), 2));
  CHECK_FALSE(
      derivable(shape_of(prev), log_of({lost_b, failed_line("c", "rank 3 exited with 1")}), 2));
  CHECK_FALSE(derivable(shape_of(prev), log_of({lost_b, closed_line("job finished")}), 2));
  CHECK_FALSE(derivable(shape_of(prev), log_of({lost_line("b", "connection", "301")}), 2));
  CHECK_FALSE(derivable(shape_of(prev), log_of({lost_b, lost_d}), 4));
  C10dRoundHeader hosted = prev;
  hosted.host_first = true;
  CHECK_FALSE(derivable(shape_of(hosted),
                        log_of({lost_line("h", "heartbeat", "9", LostMember{0, 1})}),
                        1));
  C10dRoundHeader large = prev;
  large.size = 1000;
  std::vector<Bytes> many;
  for (int i = 0; i <= kMaxDerivedLosses; ++i) {
    std::string name = std::to_string(i);  // (not "m" + ...: GCC 12 -O3 false -Wrestrict)
    name.insert(name.begin(), 'm');
    many.push_back(lost_line(name, "connection", "1", LostMember{i, 1}));
  }
  CHECK_FALSE(derivable(shape_of(large), log_of(many), 1));
  many.pop_back();
  CHECK(derivable(shape_of(large), log_of(many), 1).has_value());
}

TEST_CASE("the plan in a round's size key reads back, and other values are not plans",
          "[c10d][reform]") {
  DerivedRound d;
  d.from_round = 7;
  d.lost = {{2, 8}, {5, 8}};
  d.master_addr = "10.0.0.1";
  d.master_port = 4000;
  const Bytes value = encode_plan(98, "10.0.0.3_77", d);
  CHECK(to_string(value).starts_with("98 10.0.0.3_77 {"));
  const auto back = decode_plan(value, "r8/size");
  REQUIRE(back.has_value());
  CHECK(back->from_round == 7);
  CHECK(back->lost.size() == 2);
  CHECK(back->lost[1].group_rank == 5);
  CHECK(back->master_port == 4000);
  CHECK_FALSE(decode_plan(to_bytes("3 n1"), "r8/size"));
  CHECK_FALSE(decode_plan(to_bytes("closed"), "r8/size"));
  CHECK_FALSE(decode_plan(join_plan("n1"), "r8/size"));
  CHECK(is_join_plan(join_plan("n1")));
  CHECK_FALSE(is_join_plan(value));
  CHECK_THROWS_AS(decode_plan(to_bytes(R"(3 n1 {"version":4})"), "r8/size"),
                  ddp::ConfigError);
}

TEST_CASE("a lost line keeps where the node sat; an older line without it still counts",
          "[c10d][reform]") {
  const auto changes = parse_changes(lost_line("x", "connection", "12", LostMember{4, 8}));
  REQUIRE(changes.lost_members.size() == 1);
  REQUIRE(changes.lost_members[0].has_value());
  CHECK(changes.lost_members[0]->group_rank == 4);
  CHECK(changes.lost_members[0]->local_world_size == 8);
  CHECK(changes.losses[0].after == std::chrono::milliseconds(12));
  const auto old = parse_changes(to_bytes("lost y by=heartbeat after_ms=9\n"));
  CHECK(old.lost == std::vector<std::string>{"y"});
  CHECK_FALSE(old.lost_members[0].has_value());
}
