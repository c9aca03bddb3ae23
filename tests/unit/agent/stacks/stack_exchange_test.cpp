// Multi-node stack requests through a store: every answering node is gathered, a silent one is
// named, answers survive their JSON round trip.
#include <catch2/catch.hpp>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include "agent/stacks/stack_exchange.hpp"
#include "rendezvous/store/memory_store.hpp"

using namespace ddp::agent;
namespace asio = boost::asio;

namespace {

RankStack stack_of(int rank, const std::string& text) {
  RankStack s;
  s.rank = rank;
  s.local_rank = rank % 2;
  s.pid = 4000 + rank;
  s.host = "node" + std::to_string(rank / 2);
  s.kind = "python";
  s.text = text;
  return s;
}

// Starts node `node`'s answer loop: it answers with ranks 2*node and 2*node+1.
void answer_as(asio::io_context& io, ddp::rdzv::Store& store, int node) {
  asio::co_spawn(
      io,
      answer_stack_requests(store, "job", [node] { return node; }, "node" + std::to_string(node),
                            [node]() -> asio::awaitable<std::vector<RankStack>> {
                              co_return std::vector<RankStack>{
                                  stack_of(2 * node, "a\n"), stack_of(2 * node + 1, "b\n")};
                            }),
      asio::detached);
}

GatheredStacks ask(asio::io_context& io, ddp::rdzv::Store& store,
                   std::chrono::milliseconds timeout) {
  GatheredStacks result;
  asio::co_spawn(io, request_stacks(store, "job", timeout),
                 [&](std::exception_ptr e, GatheredStacks gathered) {
                   if (e) std::rethrow_exception(e);
                   result = std::move(gathered);
                   io.stop();
                 });
  io.run();
  return result;
}

asio::awaitable<void> set_nodes(ddp::rdzv::Store& store, int nodes) {
  co_await publish_node_count(store, "job", nodes);
}

}  // namespace

TEST_CASE("a stack request gathers the answer of every node", "[stacks]") {
  asio::io_context io;
  ddp::rdzv::MemoryStore store(io.get_executor());
  asio::co_spawn(io, set_nodes(store, 2), asio::detached);
  answer_as(io, store, 0);
  answer_as(io, store, 1);
  const auto gathered = ask(io, store, std::chrono::seconds(30));
  CHECK(gathered.nodes == 2);
  CHECK(gathered.silent_nodes.empty());
  REQUIRE(gathered.stacks.size() == 4);
  std::vector<int> ranks;
  for (const auto& s : gathered.stacks) ranks.push_back(s.rank);
  std::sort(ranks.begin(), ranks.end());
  CHECK(ranks == std::vector<int>{0, 1, 2, 3});
  CHECK(gathered.stacks[3].host == "node1");
  CHECK(gathered.stacks[3].pid == 4003);
}

TEST_CASE("a node that does not answer is named silent", "[stacks]") {
  asio::io_context io;
  ddp::rdzv::MemoryStore store(io.get_executor());
  asio::co_spawn(io, set_nodes(store, 2), asio::detached);
  answer_as(io, store, 0);
  const auto gathered = ask(io, store, std::chrono::milliseconds(200));
  CHECK(gathered.silent_nodes == std::vector<int>{1});
  CHECK(gathered.stacks.size() == 2);
}

TEST_CASE("node answers survive encoding; other text is refused", "[stacks]") {
  std::vector<RankStack> back;
  REQUIRE(decode_node_stacks(encode_node_stacks(1, "h", {stack_of(3, "x\ny\n")}), back));
  REQUIRE(back.size() == 1);
  CHECK(back[0].rank == 3);
  CHECK(back[0].local_rank == 1);
  CHECK(back[0].text == "x\ny\n");
  CHECK(back[0].kind == "python");
  CHECK_FALSE(decode_node_stacks("not json", back));
  CHECK_FALSE(decode_node_stacks("{\"ranks\": 3}", back));
}

TEST_CASE("a node answer has one byte form; absent fields read as defaults", "[stacks]") {
  CHECK(encode_node_stacks(1, "h", {stack_of(3, "x\n")}) ==
        R"({"host":"h","node":1,"ranks":[{"host":"node1","kind":"python","local_rank":1,)"
        R"("pid":4003,"rank":3,"text":"x\n"}],"version":1})");
  std::vector<RankStack> back;
  REQUIRE(decode_node_stacks(R"({"ranks":[{"rank":5}]})", back));
  REQUIRE(back.size() == 1);
  CHECK(back[0].rank == 5);
  CHECK(back[0].pid == 0);
  CHECK(back[0].host.empty());
  CHECK(back[0].kind == "none");  // no stack without a kind
  CHECK(back[0].text.empty());
}

TEST_CASE("a node whose answer loop starts after the request still answers it", "[stacks]") {
  asio::io_context io;
  ddp::rdzv::MemoryStore store(io.get_executor());
  asio::co_spawn(io, set_nodes(store, 2), asio::detached);
  answer_as(io, store, 0);
  GatheredStacks result;
  asio::co_spawn(io, request_stacks(store, "job", std::chrono::seconds(5)),
                 [&](std::exception_ptr e, GatheredStacks gathered) {
                   if (e) std::rethrow_exception(e);
                   result = std::move(gathered);
                   io.stop();
                 });
  io.poll();  // the request is made, node 0 has answered; node 1 has not started yet
  answer_as(io, store, 1);
  io.run();
  CHECK(result.silent_nodes.empty());
  CHECK(result.stacks.size() == 4);
}
