// The store side of multi-node stack reports. An answer loop holds one store connection in a
// wait; it wakes for each request key in turn, so every agent answers each request once, and a
// request made while it was collecting is still waiting for it under the next key.

#include "agent/stacks/stack_exchange.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "ddp/error.hpp"
#include "rendezvous/store/prefix_store.hpp"

namespace ddp::agent {
namespace {

namespace asio = boost::asio;
using nlohmann::json;
constexpr auto kAnswerPoll = std::chrono::seconds(30);

// The keys of job `run_id`'s stack requests in `store`.
rdzv::PrefixStore stacks_of(rdzv::Store& store, const std::string& run_id) {
  return rdzv::PrefixStore(fmt::format("/ddprun/{}/stacks", run_id), store);
}

}  // namespace

asio::awaitable<void> publish_node_count(rdzv::Store& store, std::string run_id, int nodes) {
  rdzv::PrefixStore stacks = stacks_of(store, run_id);
  co_await stacks.set("nodes", rdzv::to_bytes(std::to_string(nodes)));
}

// Field for field; a field another build left out reads as its default.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(RankStack, rank, local_rank, pid, host, kind, text)

std::string encode_node_stacks(int node, const std::string& host,
                               const std::vector<RankStack>& stacks) {
  return json{{"version", 1}, {"node", node}, {"host", host}, {"ranks", stacks}}.dump();
}

bool decode_node_stacks(const std::string& text, std::vector<RankStack>& stacks) {
  const json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("ranks") ||
      !doc["ranks"].is_array()) {
    return false;
  }
  for (const auto& r : doc["ranks"]) {
    if (!r.is_object()) return false;
    stacks.push_back(r.get<RankStack>());
  }
  return true;
}

asio::awaitable<GatheredStacks> request_stacks(rdzv::Store& store, std::string run_id,
                                               std::chrono::milliseconds timeout) {
  rdzv::PrefixStore stacks = stacks_of(store, run_id);
  GatheredStacks gathered;
  // (Keys go through named vectors: GCC 12 miscompiles braced lists inside co_await.)
  std::vector<std::string> wanted{"nodes"};
  const bool running = co_await stacks.wait_for(wanted, timeout);
  if (!running) {
    throw ConfigError(fmt::format("no job with --rdzv_id={} runs at this store", run_id));
  }
  gathered.nodes = std::stoi(rdzv::to_string(co_await stacks.get("nodes")));
  const std::int64_t n = co_await stacks.add("count", 1);
  co_await stacks.set(fmt::format("{}/request", n), rdzv::to_bytes("stacks"));
  std::vector<std::string> keys;
  for (int g = 0; g < gathered.nodes; ++g) keys.push_back(fmt::format("{}/node_{}", n, g));
  co_await stacks.wait_for(keys, timeout);  // false: some node is silent; gather the rest
  for (int g = 0; g < gathered.nodes; ++g) {
    const auto& key = keys[static_cast<std::size_t>(g)];
    wanted = {key};
    const bool answered = co_await stacks.check(wanted);
    bool decoded = false;
    if (answered) {
      const auto answer = co_await stacks.get(key);
      decoded = decode_node_stacks(rdzv::to_string(answer), gathered.stacks);
    }
    if (!decoded) gathered.silent_nodes.push_back(g);
  }
  co_return gathered;
}

asio::awaitable<void> answer_stack_requests(rdzv::Store& store, std::string run_id,
                                            std::function<int()> node, std::string host,
                                            CollectNodeStacks collect) {
  // Start at the latest request, not after it: a loop that connects late (a new node, or the
  // connection spread after the round) still answers a request its asker is gathering now.
  // Answering a request whose asker has gone only leaves one key behind.
  rdzv::PrefixStore stacks = stacks_of(store, run_id);
  std::int64_t next = std::max<std::int64_t>(co_await stacks.add("count", 0), 1);
  for (;;) {
    std::vector<std::string> wanted{fmt::format("{}/request", next)};
    const bool requested = co_await stacks.wait_for(wanted, kAnswerPoll);
    if (!requested) continue;
    const auto answer = co_await collect();
    const int g = node();
    co_await stacks.set(fmt::format("{}/node_{}", next, g),
                        rdzv::to_bytes(encode_node_stacks(g, host, answer)));
    ++next;
  }
}

}  // namespace ddp::agent
