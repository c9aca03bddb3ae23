#pragma once
// What ddp-train's in-process recovery does about the process group it trains with when the
// agent announces a new round: the decision alone, pure, so that it is tested without a GPU or a
// peer. RecoverySession acts on it on the reform client's thread (recovery_session.hpp).

#include <string>

namespace ddp::train {

enum class ReformAction {
  kWait,        // the training thread takes the place at its next commit or failed collective
  kAbortGroup,  // abort the group: a collective blocked on a peer that is gone returns
  kGiveUp,      // leave the last commit in a file and end the process (kReformGiveUpExit)
};

struct ReformFacts {
  bool has_group = false;    // a group is in use (none while the training thread joins one)
  bool aborted = false;      // that group was aborted already
  int group_round = -1;      // the round it was formed in
  int group_size = 0;        // its world size
  int announced_round = -1;  // the new place's round
  int announced_world = -1;  // the new place's WORLD_SIZE; -1 when it does not say
  bool overdue = false;      // the place waited --reform_grace for the training thread
};

// On arrival: abort when the new round is smaller than the group's (a member is gone: an NCCL
// collective with it would wait for ever, and so would a Gloo one whose peer's link was cut,
// until the group's timeout; a Gloo one with a dead peer fails by itself, and the abort then
// finds the group broken already, which costs nothing); otherwise wait, so
// that a joining node is taken in at a step boundary with the step in flight finished. Overdue:
// abort a group not aborted yet; give up when there is none to abort (the training thread is
// blocked joining, or an abort did not free it).
ReformAction decide_reform_action(const ReformFacts& facts);

// "wait", "abort_group", "give_up".
std::string to_string(ReformAction action);

}  // namespace ddp::train
