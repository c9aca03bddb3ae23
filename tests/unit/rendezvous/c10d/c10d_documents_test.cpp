// The c10d documents and change log: pure encoding, rank order and event parsing.

#include <catch2/catch.hpp>

#include "ddp/error.hpp"
#include "rendezvous/c10d/c10d_assignment.hpp"
#include "rendezvous/c10d/c10d_change_log.hpp"

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
  CHECK(place.neighbour_index == 3);
  CHECK(place.neighbour == "c");
  CHECK(places[2].neighbour == "host");  // the ring closes
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

TEST_CASE("a member alone in its round has no neighbour to watch", "[c10d]") {
  const C10dAssignment a =
      assign_ranks(0, 0, {{1, {"a", "10.0.0.1", 2, false, "", 0}}}, {"store", 29400});
  const std::vector<C10dPlace> places = places_of(a);
  REQUIRE(places.size() == 1);
  const C10dPlace& place = places[0];
  CHECK(place.neighbour_index == 0);
  CHECK(place.neighbour.empty());
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

  const C10dPlace p{1, 3, 2, "x"};
  const C10dPlace q = decode_place(encode(p), "place");
  CHECK(q.group_rank == 1);
  CHECK(q.rank_base == 3);
  CHECK(q.neighbour_index == 2);
  CHECK(q.neighbour == "x");
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
  C10dChanges c = parse_changes(log);
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
  C10dChanges c;
  CHECK_FALSE(c.failure_cause().has_value());
  c.waiting.push_back("late");  // a waiting node explains no failure
  CHECK_FALSE(c.failure_cause().has_value());
  c.failed.push_back("n1 exit code 3");
  REQUIRE(c.failure_cause().has_value());
  CHECK(c.failure_cause()->change == RoundChange::kPeerFailed);
  c.lost.push_back("host");  // a loss wins: the failure it caused elsewhere spent nothing either
  CHECK(c.failure_cause()->change == RoundChange::kNodeLost);
  CHECK(c.failure_cause()->detail.find("host") != std::string::npos);

  C10dChanges closed;
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
        R"({"host_first":true,"master_addr":"10.0.0.2","master_port":4711,"restart_count":2,)"
        R"("round":5,"size":3,"version":4,"world_size":7})");
  const C10dPlace place{1, 4, 2, "c"};
  CHECK(to_string(encode(place)) ==
        R"({"group_rank":1,"neighbour":"c","neighbour_index":2,"rank_base":4,"version":4})");
  const auto back = decode_round_header(encode(header), "header");
  CHECK(back.master_port == 4711);
  CHECK(back.world_size == 7);
  CHECK(decode_place(encode(place), "place").neighbour == "c");
  CHECK_THROWS_AS(decode_place(to_bytes(R"({"version":4,"group_rank":1})"), "place"),
                  ddp::InternalError);
}
