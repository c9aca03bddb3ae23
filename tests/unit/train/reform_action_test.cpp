// decide_reform_action: what ddp-train's in-process recovery does about its group when the agent
// announces a round (the decision behind the NCCL abort; the abort itself needs two GPUs:
// scripts/gpu/inprocess_nccl_train.sh).

#include "apps/ddp-train/reform_action.hpp"

#include <catch2/catch.hpp>

using ddp::train::decide_reform_action;
using ddp::train::ReformAction;
using ddp::train::ReformFacts;

namespace {

// A group of 3 formed in round 4, not aborted, and a place for round 5.
ReformFacts group_of_three() {
  return ReformFacts{.has_group = true,
                     .aborted = false,
                     .group_round = 4,
                     .group_size = 3,
                     .announced_round = 5,
                     .announced_world = 3,
                     .overdue = false};
}

}  // namespace

TEST_CASE("issue 29: a smaller round aborts the group at once; any other waits for the commit",
          "[reform]") {
  ReformFacts facts = group_of_three();
  SECTION("a member lost") {
    facts.announced_world = 2;
    CHECK(decide_reform_action(facts) == ReformAction::kAbortGroup);
  }
  SECTION("a node joining: the step in flight finishes, the commit takes the place") {
    facts.announced_world = 4;
    CHECK(decide_reform_action(facts) == ReformAction::kWait);
  }
  SECTION("a peer replaced at the same size") {
    CHECK(decide_reform_action(facts) == ReformAction::kWait);
  }
  SECTION("a place that names no world size") {
    facts.announced_world = -1;
    CHECK(decide_reform_action(facts) == ReformAction::kWait);
  }
}

TEST_CASE("issue 29: on arrival, only a group older than the place and not aborted is aborted",
          "[reform]") {
  ReformFacts facts = group_of_three();
  facts.announced_world = 1;
  SECTION("already aborted") {
    facts.aborted = true;
    CHECK(decide_reform_action(facts) == ReformAction::kWait);
  }
  SECTION("no group: the training thread is joining one") {
    facts.has_group = false;
    facts.group_size = 0;
    CHECK(decide_reform_action(facts) == ReformAction::kWait);
  }
  SECTION("the group already belongs to the announced round (taken before the handler ran)") {
    facts.group_round = 5;
    CHECK(decide_reform_action(facts) == ReformAction::kWait);
  }
}

TEST_CASE("issue 29: an overdue place aborts the group first, then gives the process up",
          "[reform]") {
  ReformFacts facts = group_of_three();
  facts.announced_world = 4;  // even for a join: the training thread is blocked all the same
  facts.overdue = true;
  CHECK(decide_reform_action(facts) == ReformAction::kAbortGroup);
  facts.aborted = true;  // the abort did not free it (a copy blocked in the CUDA runtime)
  CHECK(decide_reform_action(facts) == ReformAction::kGiveUp);
  facts.aborted = false;
  facts.has_group = false;  // blocked joining a round that counts a peer that died
  CHECK(decide_reform_action(facts) == ReformAction::kGiveUp);
  CHECK(ddp::train::to_string(ReformAction::kGiveUp) == "give_up");
}
