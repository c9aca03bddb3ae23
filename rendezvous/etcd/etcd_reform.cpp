// Re-forming an etcd round after a loss without re-joining. The plan of round N+1 lives in
// r<N+1>/assignment, where a closed round's header would go, so that a plan and a round a late
// node closed first exclude each other; it is proposed as engine/round_plan.hpp says. Group rank
// 0 proposes, since a derived plan carries its fresh worker store (and the round's links go to
// its agent); the others wait for its plan, at most a last call. A derived plan lists the lost
// members' places, so each survivor computes its own (engine/derived_round.hpp) and puts its
// record, bound to its lease, in r<N+1>/join/ in one more request: that record is what the next
// round's expected size, the host's admission of the round's nodes and the monitor's loss of a
// member go by; a member that died before it put its record is found by its record in round N,
// which the monitor of a derived round watches too (etcd_monitor.cpp). A join plan sends every
// node through the full join of next_round.

#include <fmt/format.h>

#include <algorithm>

#include "ddp/error.hpp"
#include "rendezvous/engine/rdzv_log.hpp"
#include "rendezvous/engine/round_plan.hpp"
#include "rendezvous/etcd/etcd_coordination.hpp"
#include "rendezvous/etcd/etcd_keys.hpp"
#include "rendezvous/etcd/etcd_lease.hpp"
#include "rendezvous/etcd/etcd_links.hpp"
#include "rendezvous/etcd/etcd_rendezvous.hpp"

namespace ddp::rdzv::etcd {

int EtcdRendezvous::records_round() const {
  if (!current_) return 0;
  return current_->header.derived ? current_->header.round - 1 : current_->header.round;
}

asio::awaitable<Bytes> EtcdRendezvous::plan_of(const RoundHeader& prev, const RoundChanges& seen) {
  const int next = prev.round + 1;
  const std::shared_ptr<Lease> lease = lease_;
  EtcdCoordination coordination(*client_, [lease] { return lease ? lease->id : 0; });
  const bool host_lost = std::any_of(seen.lost_members.begin(), seen.lost_members.end(),
                                     [](const auto& m) { return m && m->group_rank == 0; });
  if (current_->group_rank != 0 && host_lost) {
    co_return co_await coordination.create(keys::assignment(job_, next), join_plan(self_.name));
  }
  if (current_->group_rank != 0) {
    // The host may have died with the loss seen, before anyone saw it lost: its link store
    // refusing a connect says so (etcd_absentees.cpp says why one refusal is enough).
    HostAlive host_alive;
    if (prev.link_port != 0 && !prev.master_addr.empty()) {
      host_alive = [addr = prev.master_addr, port = prev.link_port]() -> asio::awaitable<bool> {
        co_return co_await probe(addr, port, std::chrono::milliseconds(250)) != Probe::kRefused;
      };
    }
    co_return co_await await_plan(coordination, keys::assignment(job_, next), self_.name,
                                  settings_.last_call_timeout, std::move(host_alive));
  }
  PlanProposal proposal;
  proposal.key = keys::assignment(job_, next);
  proposal.prev = RoundShape{prev.round, prev.size, /*host_first=*/true};
  proposal.name = self_.name;
  proposal.min_nodes = settings_.min_nodes;
  // A node that spent a restart this round re-joins (its failure may postdate the loss).
  proposal.may_derive = failed_round_ != prev.round;
  // A node that joined round N+1 (a spare, a late node) joins with everyone; a member whose
  // workers succeeded waits in the exit barrier: the round closes without it.
  proposal.full_join_if_any = {keys::joins(job_, next), keys::dones(job_, prev.round)};
  if (open_worker_store_) {
    proposal.open_worker_store = [open = open_worker_store_, next] { return open(next); };
  }
  co_return co_await propose_plan(coordination, std::move(proposal), seen);
}

asio::awaitable<std::optional<RendezvousInfo>> EtcdRendezvous::reform(RoundChanges seen) {
  const RoundHeader prev = current_->header;
  const int next = prev.round + 1;
  const Bytes plan = co_await plan_of(prev, seen);
  const std::optional<DerivedRound> derived = decode_plan(plan, keys::assignment(job_, next));
  const std::optional<int> rank =
      derived ? derived_rank(*derived, current_->group_rank) : std::nullopt;
  if (!derived || derived->from_round != prev.round || !rank) {
    co_return std::nullopt;  // a full join (a round this node is lost from: it is late there)
  }
  const RoundHeader header = derive(prev, *derived, plan_closer(plan));
  current_ = Member{header, *rank, prev, derived};
  // One request: this node's record in the derived round, bound to its lease.
  NodeDesc record = desc_;
  record.master_addr.clear();
  record.master_port = 0;
  record.group_rank = *rank;
  PutRequest put{keys::join(job_, next, self_.name), encode(record), lease_->id};
  co_await client_->put(std::move(put));
  if (header.closer == self_.name) {
    // Newcomers join the job's last round, and find themselves late there.
    PutRequest latest{keys::latest(job_), std::to_string(next), 0};
    co_await client_->put(std::move(latest));
  }
  RendezvousInfo info = info_for(header, *rank, settings_.run_id);
  log_round_derived(info, derived->from_round, derived->lost.size());
  start_monitor(*current_);
  co_await start_link(*current_);
  if (*rank == 0) find_dead_in_plan(prev);
  co_return info;
}

}  // namespace ddp::rdzv::etcd
