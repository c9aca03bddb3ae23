// Re-forming after a loss without re-joining. The plan of round N+1 lives in r<N+1>/size and is
// proposed as engine/round_plan.hpp says. In a large round only a few members read the log and
// propose (c10d_monitor.cpp); the others wait for the plan. A derived plan lists the lost
// members' places, so each survivor computes its own (engine/derived_round.hpp) and writes its
// first heartbeat, descriptor and lease in one more request; the store's work is O(survivors).
// A join plan, or a round N+1 a late node closed first, sends every node through the full join
// of next_round.

#include <fmt/format.h>

#include "ddp/error.hpp"
#include "rendezvous/c10d/c10d_keys.hpp"
#include "rendezvous/c10d/c10d_rendezvous.hpp"
#include "rendezvous/engine/rdzv_log.hpp"
#include "rendezvous/engine/store_coordination.hpp"

namespace ddp::rdzv {

namespace keys = c10d_keys;

asio::awaitable<Bytes> C10dRendezvous::claim_size(int round, Bytes desired) {
  const std::string key = keys::size(round);
  Bytes stored = co_await store_.compare_set(key, {}, desired);
  // A join plan only says that the round is joined in full: its closer, or the job's end, takes
  // the key from it (once: a plan is written only over an absent key).
  if (is_join_plan(stored)) stored = co_await store_.compare_set(key, stored, desired);
  co_return stored;
}

PlanProposal C10dRendezvous::plan_proposal(const C10dRoundHeader& prev) const {
  PlanProposal proposal;
  proposal.key = keys::size(prev.round + 1);
  proposal.prev = shape_of(prev);
  proposal.name = self_.name;
  proposal.min_nodes = settings_.min_nodes;
  // A node that spent a restart this round re-joins (its failed line may postdate the log read).
  proposal.may_derive = !current_ || failed_round_ != current_->header.round;
  // A spare that stood by at a full round takes the freed slot: everyone re-joins with it. A
  // member whose workers succeeded waits in the exit barrier: the round closes without it.
  if (prev.size >= settings_.max_nodes) {
    proposal.full_join_if_any.push_back(keys::standby(prev.round));
  }
  proposal.full_join_if_any.push_back(keys::finished(prev.round));
  if (self_.is_host && open_worker_store_) {
    proposal.open_worker_store = [open = open_worker_store_, next = prev.round + 1] {
      return open(next);
    };
  }
  return proposal;
}

asio::awaitable<Bytes> C10dRendezvous::plan_of(int next, const RoundChanges& seen) {
  const C10dRoundHeader& prev = current_->header;
  const std::string key = keys::size(next);
  // With the store host among the members it alone proposes, since a derived plan carries its
  // fresh worker store. The others wait for its plan, at most a last call (a host in the exit
  // barrier does not re-form), and then ask for a full join themselves.
  StoreCoordination coordination(store_);
  if (prev.host_first && !self_.is_host) {
    co_return co_await await_plan(coordination, key, self_.name, settings_.last_call_timeout);
  }
  co_return co_await propose_plan(coordination, plan_proposal(prev), seen);
}

asio::awaitable<std::optional<RendezvousInfo>> C10dRendezvous::reform(int local_world_size,
                                                                     Seen seen) {
  const int next = current_->header.round + 1;
  if (!seen.plan) {
    RoundChanges changes = std::move(seen.changes);
    if (changes.empty()) {
      // The monitor had not read the log yet (the agent came here from its own verdict, or
      // nothing happened): read it once.
      const std::string change_key = keys::change(current_->header.round);
      const bool logged = co_await store_.check(c10d_keys::one(change_key));
      if (logged) changes = parse_changes(co_await store_.get_existing(change_key));
    }
    seen.plan = co_await plan_of(next, changes);
  }
  const Bytes plan = std::move(*seen.plan);
  const std::optional<DerivedRound> derived = decode_plan(plan, keys::size(next));
  if (!derived || derived->from_round != current_->header.round ||
      !derived_rank(*derived, current_->place.group_rank)) {
    co_return std::nullopt;  // a full join (a round this node is lost from: it is late there)
  }
  const auto [header, place] = derive(current_->header, current_->place, *derived);
  current_ = Member{header, place, derived};
  current_index_ = place.group_rank + 1;
  // One request: the first heartbeat (so the monitor's first beat waits an interval), the
  // descriptor (a reader names a silent member by it) and the lease, which from now on appends
  // to the new round's log.
  if (derived_desc_.empty()) {
    derived_desc_ = encode(C10dNodeDesc{self_.name, self_.addr, local_world_size, self_.is_host,
                                        {}, 0, self_.rank_hint});
  }
  std::vector<std::pair<std::string, Bytes>> mine;
  mine.emplace_back(keys::heartbeat(next, current_index_), to_bytes("1"));
  mine.emplace_back(keys::node(next, current_index_), derived_desc_);
  if (auto lease = lease_entry(next)) mine.push_back(std::move(*lease));
  co_await store_.multi_set(std::move(mine));
  if (plan_closer(plan) == self_.name) {
    // Late nodes wait on the header (and find themselves late there); newcomers read latest.
    co_await store_.set(keys::assignment(next), encode(header));
    co_await store_.set(keys::kLatest, to_bytes(std::to_string(next)));
  }
  RendezvousInfo info = info_for(header, place, settings_.run_id);
  log_round_derived(info, derived->from_round, derived->lost.size());
  start_monitor(*current_, /*beaten=*/true);
  co_return info;
}

}  // namespace ddp::rdzv
