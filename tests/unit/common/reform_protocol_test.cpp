// The hand-over channel's lines (common/reform_protocol.hpp), as both ends read them.
#include <catch2/catch.hpp>

#include "common/reform_protocol.hpp"

using namespace ddp::reform;

TEST_CASE("a place line round-trips through encode_place and parse_place_line", "[reform]") {
  const Place place{7, {{"RANK", "2"}, {"WORLD_SIZE", "3"}, {"MASTER_PORT", "29500"}}};
  std::string line = encode_place(place);
  REQUIRE(line.back() == '\n');
  line.pop_back();
  const auto parsed = parse_place_line(line);
  REQUIRE(parsed.has_value());
  CHECK(parsed->round == 7);
  CHECK(parsed->env == place.env);
}

TEST_CASE("parse_place_line refuses what is not a well-formed place", "[reform]") {
  CHECK_FALSE(parse_place_line("hello 0 12"));
  CHECK_FALSE(parse_place_line("place {not json"));
  CHECK_FALSE(parse_place_line("place [1, 2]"));
  CHECK_FALSE(parse_place_line(R"(place {"env": {}})"));
  CHECK_FALSE(parse_place_line(R"(place {"round": "1", "env": {}})"));
  CHECK_FALSE(parse_place_line(R"(place {"round": 1, "env": {"RANK": 2}})"));
}

TEST_CASE("worker lines: hello and reformed parse, others are unknown or bad", "[reform]") {
  std::string hello = encode_hello(3, 4711);
  hello.pop_back();
  const WorkerLine h = parse_worker_line(hello);
  CHECK(h.kind == WorkerLine::Kind::kHello);
  CHECK(h.local_rank == 3);
  CHECK(h.pid == 4711);
  std::string reformed = encode_reformed(12);
  reformed.pop_back();
  const WorkerLine r = parse_worker_line(reformed);
  CHECK(r.kind == WorkerLine::Kind::kReformed);
  CHECK(r.round == 12);
  CHECK(parse_worker_line("hello -1 5").kind == WorkerLine::Kind::kBad);
  CHECK(parse_worker_line("hello x").kind == WorkerLine::Kind::kBad);
  CHECK(parse_worker_line("reformed").kind == WorkerLine::Kind::kBad);
  CHECK(parse_worker_line("goodbye 1").kind == WorkerLine::Kind::kUnknown);
}
