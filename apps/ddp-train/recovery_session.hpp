#pragma once
// RecoverySession: ddp-train's side of ddprun --recovery=inprocess. It holds the reform client
// (ddp/reform_client.hpp), the round of the current group and the commit a blocked worker leaves
// behind; the trainer drives the re-form (trainer.cpp): restore the commit, drop the group, join
// the next round here, sync every rank to the most-committed state. Absent (nullptr) when the
// launcher has no hand-over channel: ddp-train then runs as under --recovery=restart.
// Training thread, except on_place() and on_overdue(), which run on the reform client's thread:
// they abort the watched group (decide_reform_action, reform_action.hpp) so that a collective
// blocked on a peer that is gone returns with IoError (NCCL always; Gloo when the peer's link was
// cut and no connection closed), or give the process up.

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "apps/ddp-train/reform_action.hpp"
#include "apps/ddp-train/train_commit.hpp"
#include "ddp/init.hpp"
#include "ddp/reform_client.hpp"

namespace ddp::train {

// Thrown at a commit when the agent has announced a new round (a node waiting to join, a peer
// lost that this rank's collectives have not met yet): the ranks re-form at a step boundary.
class RoundChanged : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class RecoverySession {
 public:
  // From the launcher's environment; nullptr without DDPRUN_REFORM_SOCKET. `grace`: how long a
  // new place may wait for the training thread before the worker gives up its process.
  // Throws IoError naming the channel when it cannot connect.
  static std::unique_ptr<RecoverySession> from_env(const InitOptions& init,
                                                   std::chrono::milliseconds grace);

  // Waits for a place of a round after the current one (at first: the current round's) and
  // joins it; a join that fails because another peer was lost meanwhile waits for the round
  // after that. REQUIRES: the caller dropped its previous group (its sockets close, so peers
  // blocked on them fail at once).
  Context join_next();
  // Throws RoundChanged when the agent has handed over a round after the current one.
  void check_new_round();
  // Tells the agent that this worker re-formed in the current round.
  void reformed();
  // The training thread committed a step: a new place is due a grace after the last of these
  // (ReformClient::progressed), so a thread blocked past it is not waited for again.
  void progressed() { client_->progressed(); }
  int round() const { return round_; }

  // The group the training thread uses from now on, formed in round(); nullptr before it drops
  // one. The client's thread may abort it when a new round is announced.
  void watch(std::shared_ptr<ProcessGroup> group);

  // From now on a worker that gives up leaves `commit` in commit_file() ("" without
  // DDPRUN_REFORM_STATE_DIR). `commit` must outlive this session.
  void guard(const TrainCommit* commit) { commit_.store(commit); }
  const std::string& commit_file() const { return commit_file_; }

 private:
  RecoverySession(const InitOptions& init, std::string commit_file);
  // On the client's thread: a place arrived; aborts the watched group when it lost a member.
  void on_place(const ReformPlace& place);
  // On the client's thread: the place of `round` waited past the grace. Aborts the watched group
  // (true: the place may wait another grace) or gives the process up.
  bool on_overdue(int round);
  // What decide_reform_action() knows of the watched group and `place`; the group too.
  std::pair<ReformFacts, std::shared_ptr<ProcessGroup>> facts_of(int round, int world,
                                                                 bool overdue);
  [[noreturn]] void give_up(int round);

  InitOptions init_;
  std::string commit_file_;
  std::atomic<const TrainCommit*> commit_{nullptr};
  std::mutex watched_mutex_;  // guards the two below: the training thread sets, the client reads
  std::shared_ptr<ProcessGroup> watched_;
  int watched_round_ = -1;
  std::unique_ptr<ReformClient> client_;  // last: its thread calls give_up()
  int round_ = -1;
};

}  // namespace ddp::train
