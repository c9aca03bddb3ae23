// The etcd round documents: descriptors, the header's member runs, group ranks and rank bases.

#include "rendezvous/etcd/etcd_documents.hpp"

#include <catch2/catch.hpp>

#include "ddp/error.hpp"

using namespace ddp::rdzv::etcd;

namespace {

KeyValue join_key(const std::string& name, std::int64_t revision, int lws, int port = 0,
                  int link_port = 0) {
  NodeDesc d{name, "10.0.0." + name, lws, "10.0.0." + name, static_cast<std::uint16_t>(port),
             {}, static_cast<std::uint16_t>(link_port)};
  return {"/ddprun/j/r0/join/" + name, encode(d), revision, revision, 1};
}

}  // namespace

TEST_CASE("a round's members are runs of create revisions; each finds its group rank", "[etcd]") {
  // Revision 13 is not a member (another write, or a key whose lease expired before the close).
  const std::vector<KeyValue> members = {join_key("1", 10, 2, 4711, 4712), join_key("2", 11, 2),
                                         join_key("3", 12, 2), join_key("4", 14, 2),
                                         join_key("5", 15, 1)};
  const RoundHeader h = header_for(3, 2, 20, members, "5");
  CHECK(h.size == 5);
  CHECK(h.runs == std::vector<MemberRun>{{10, 3, 2}, {14, 1, 2}, {15, 1, 1}});
  CHECK(h.master_addr == "10.0.0.1");  // group rank 0 hosts the workers' store
  CHECK(h.master_port == 4711);
  CHECK(h.host == "1");  // and the link store the members hold their leases at
  CHECK(h.link_port == 4712);
  CHECK(group_rank_of(h, 10) == 0);
  CHECK(group_rank_of(h, 12) == 2);
  CHECK(group_rank_of(h, 14) == 3);
  CHECK(group_rank_of(h, 15) == 4);
  CHECK_FALSE(group_rank_of(h, 13));
  CHECK_FALSE(group_rank_of(h, 16));  // arrived after the close: late
  for (int rank = 0; rank < h.size; ++rank) CHECK(group_rank_of(h, *revision_of(h, rank)) == rank);
  CHECK(revision_of(h, 3) == 14);
  CHECK_FALSE(revision_of(h, 5));
  CHECK_FALSE(revision_of(h, -1));
  CHECK(rank_base(h, 0) == 0);
  CHECK(rank_base(h, 3) == 6);
  CHECK(rank_base(h, 4) == 8);
  CHECK(world_size(h) == 9);

  const RoundHeader back = decode_round_header(encode(h), "header");
  CHECK(back.runs == h.runs);
  CHECK(back.revision == 20);
  CHECK(back.restart_count == 2);
  CHECK(back.closer == "5");
  CHECK(back.host == "1");
  CHECK(back.link_port == 4712);
  const ddp::rdzv::RendezvousInfo info = info_for(back, 4, "j");
  CHECK(info.group_rank == 4);
  CHECK(info.group_world_size == 5);
  CHECK(info.rank_base == 8);
  CHECK(info.world_size == 9);
  CHECK(info.restart_count == 2);
  CHECK(info.master_port == 4711);
}

TEST_CASE("rank hints order the members, then arrival; group rank 0 hosts", "[etcd]") {
  const auto hinted = [](std::string name, std::int64_t revision, int lws, int hint) {
    KeyValue kv = join_key(name, revision, lws, 5000 + static_cast<int>(revision));
    NodeDesc d = decode_node_desc(kv.value, kv.key);
    d.rank_hint = hint;
    kv.value = encode(d);
    return kv;
  };
  // Arrivals: n3, late (no hint), n2, n0, n1.
  const std::vector<KeyValue> members = {hinted("n3", 10, 1, 3), join_key("late", 11, 1),
                                         hinted("n2", 12, 2, 2), hinted("n0", 13, 3, 0),
                                         hinted("n1", 14, 1, 1)};
  const RoundHeader h = header_for(0, 0, 20, members, "n1");
  CHECK(group_rank_of(h, 13) == 0);
  CHECK(group_rank_of(h, 14) == 1);
  CHECK(group_rank_of(h, 12) == 2);
  CHECK(group_rank_of(h, 10) == 3);
  CHECK(group_rank_of(h, 11) == 4);
  CHECK(h.host == "n0");
  CHECK(h.master_port == 5013);
  CHECK(rank_base(h, 3) == 6);  // 3 + 1 + 2 workers before n3
  CHECK(decode_round_header(encode(h), "header").runs == h.runs);
  CHECK(decode_node_desc(members[2].value, "desc").rank_hint == 2);
  CHECK(decode_node_desc(members[1].value, "desc").rank_hint == -1);
  CHECK(members[1].value.find("rank_hint") == std::string::npos);
}

TEST_CASE("a thousand joins in a row make one run", "[etcd]") {
  std::vector<KeyValue> members;
  for (int i = 0; i < 1000; ++i) members.push_back(join_key(std::to_string(i), 100 + i, 8));
  const RoundHeader h = header_for(0, 0, 1100, members, "x");
  CHECK(h.runs.size() == 1);
  CHECK(encode(h).size() < 300);
  CHECK(group_rank_of(h, 1099) == 999);
  CHECK(world_size(h) == 8000);
}

TEST_CASE("documents reject other text, naming the key", "[etcd]") {
  CHECK_THROWS_WITH(decode_round_header("closed", "/ddprun/j/r1/assignment"),
                    Catch::Contains("/ddprun/j/r1/assignment"));
  CHECK_THROWS_AS(decode_node_desc(R"({"version":1,"name":"a"})", "desc"), ddp::IoError);
  const NodeDesc d = decode_node_desc(encode(NodeDesc{"n", "a", 3, "m", 5}), "desc");
  CHECK(d.local_world_size == 3);
  CHECK(d.master_port == 5);
  CHECK(d.addresses.empty());
}

TEST_CASE("a member record carries every address of its node", "[etcd][security]") {
  const NodeDesc d = decode_node_desc(
      encode(NodeDesc{"n", "10.0.0.2", 1, "10.0.0.2", 7, {"10.0.0.2", "10.9.0.2", "fd00::2"}}),
      "desc");
  CHECK(d.addresses == std::vector<std::string>{"10.0.0.2", "10.9.0.2", "fd00::2"});
}

TEST_CASE("the failure key carries the restart count it spent", "[etcd]") {
  const std::string v = failed_value(3, "10.0.0.1_77", "rank 2 exited with 1\nand more");
  CHECK(failed_restart_count(v) == 3);
  CHECK(failed_detail(v) == "10.0.0.1_77 rank 2 exited with 1 and more");
  CHECK(failed_restart_count("garbage") == 0);
}
