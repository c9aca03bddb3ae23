#pragma once
// Stack requests across nodes, through the job's store: any agent (on SIGQUIT) or ddprun-stacks
// asks; every agent of the job answers with its node's stacks; the asker gathers them.
// Keys, under "/ddprun/<run_id>/stacks/" (a PrefixStore over the job's store):
//   count         request counter (add): request n is the value add(count, 1) returned
//   <n>/request   set by the asker: wakes every agent's answer loop
//   <n>/node_<g>  node g's answer: {"version":1,"node":g,"host":..,"ranks":[RankStack...]}
//   nodes         the node count of the current round (every agent sets it after rendezvous)
// Runs on the caller's io_context.

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "agent/stacks/stack_report.hpp"
#include "rendezvous/store/store.hpp"

namespace ddp::agent {

// Sets `nodes` (the current round's node count) for requests of job `run_id` to wait for.
boost::asio::awaitable<void> publish_node_count(rdzv::Store& store, std::string run_id, int nodes);

// A node's answer as JSON text and back. parse returns false for text that is not an answer.
std::string encode_node_stacks(int node, const std::string& host,
                               const std::vector<RankStack>& stacks);
bool decode_node_stacks(const std::string& text, std::vector<RankStack>& stacks);

struct GatheredStacks {
  std::vector<RankStack> stacks;  // every rank that answered
  std::vector<int> silent_nodes;  // nodes that did not answer within the timeout
  int nodes = 0;
};

// Asks every agent of `run_id` for its stacks and gathers the answers for up to `timeout`.
// Throws what the store throws (IoError, TimeoutError).
boost::asio::awaitable<GatheredStacks> request_stacks(rdzv::Store& store, std::string run_id,
                                                      std::chrono::milliseconds timeout);

// Answers requests until the store fails (then throws its error), from the latest one made
// before it started: for each, calls `collect` and sets this node's answer under `node()` (read
// at answer time: ranks can change).
using CollectNodeStacks = std::function<boost::asio::awaitable<std::vector<RankStack>>()>;
boost::asio::awaitable<void> answer_stack_requests(rdzv::Store& store, std::string run_id,
                                                   std::function<int()> node, std::string host,
                                                   CollectNodeStacks collect);

}  // namespace ddp::agent
