// decide_reform_action. A smaller round is the one sure sign, on arrival, that a member of the
// group is gone: the agent shrinks a round only when a node or a worker left it. The decision is
// the same for every backend: the step in flight cannot finish without the lost member, so the
// abort loses nothing, and it spares a Gloo collective blocked on a cut link the wait for the
// grace (Gloo's abort: collectives/gloo/gloo_abort.cpp). Any other round
// (a node waiting to join, a peer replaced at the same size) leaves the group whole until the
// training thread reaches its commit; if it does not within the grace, it is blocked all the
// same, and the abort frees it.

#include "apps/ddp-train/reform_action.hpp"

namespace ddp::train {

ReformAction decide_reform_action(const ReformFacts& facts) {
  const bool abortable = facts.has_group && !facts.aborted;
  if (facts.overdue) return abortable ? ReformAction::kAbortGroup : ReformAction::kGiveUp;
  const bool stale = facts.announced_round > facts.group_round;
  const bool shrunk = facts.announced_world > 0 && facts.announced_world < facts.group_size;
  return abortable && stale && shrunk ? ReformAction::kAbortGroup : ReformAction::kWait;
}

std::string to_string(ReformAction action) {
  switch (action) {
    case ReformAction::kWait:
      return "wait";
    case ReformAction::kAbortGroup:
      return "abort_group";
    case ReformAction::kGiveUp:
      return "give_up";
  }
  return "unknown";
}

}  // namespace ddp::train
