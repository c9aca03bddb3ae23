#pragma once
// Proposing the plan of round N+1 after round N changed (derived_round.hpp), over Coordination:
// the first proposer creates the plan (create-if-absent) and the create's reply gives every later
// proposer the winning plan, one request and a few hundred bytes. Where the host of a round must
// propose (its derived plan carries its fresh worker store), the others wait for its plan and ask
// for a full join only when none comes. Each backend then takes its place in a derived round with
// O(1) requests of its own (c10d_reform.cpp, etcd_reform.cpp).

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "rendezvous/engine/coordination.hpp"
#include "rendezvous/engine/derived_round.hpp"

namespace ddp::rdzv {

// What a proposal for round N+1 depends on besides round N's changes.
struct PlanProposal {
  std::string key;  // where round N+1's plan lives
  RoundShape prev;  // round N
  std::string name;  // the proposer
  int min_nodes = 1;
  bool may_derive = true;  // false: the proposer spent a restart in round N
  // Tallies an arrival at which sends every node through a full join: a spare standing by for a
  // slot, a member whose workers succeeded (it waits in the exit barrier and does not re-form).
  std::vector<std::string> full_join_if_any;
  // The host's: opens a fresh worker store for the derived round (MASTER_ADDR, MASTER_PORT).
  std::function<std::pair<std::string, std::uint16_t>()> open_worker_store;
};

// Proposes the plan (create from absent) and returns the plan that won.
asio::awaitable<Bytes> propose_plan(Coordination& coordination, PlanProposal proposal,
                                    RoundChanges changes);

// Whether the host that is to propose still lives, asked while a member waits for its plan.
using HostAlive = std::function<asio::awaitable<bool>()>;

// A member that leaves the proposal to the host: the plan at `key` once it exists, or after
// `timeout` (the host may be in the exit barrier, which does not re-form) a full join it asks for.
// With `host_alive`, the wait asks it every `poll` and asks for the full join at once when the host
// is gone (it died with the loss the members re-form from, before anyone saw it lost).
asio::awaitable<Bytes> await_plan(Coordination& coordination, std::string key, std::string name,
                                  std::chrono::milliseconds timeout, HostAlive host_alive = {},
                                  std::chrono::milliseconds poll = std::chrono::milliseconds(250));

}  // namespace ddp::rdzv
