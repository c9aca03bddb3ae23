#pragma once
// TrainCommit: ddp-train's in-memory commit for --recovery=inprocess: a copy of the host model's
// values, the optimizer's state and the training position, taken after a step, with the number
// of commits it has seen. After a re-form the trainer restores it and the ranks sync to the one
// with the most commits (ddp/state_sync.hpp). It is also what a worker that gives up a blocked
// process leaves in a file (a ddp-train checkpoint with "commits" in its metadata).
// take(), restore() and load() run on the training thread; checkpoint() also on the reform
// client's thread (give-up), hence the mutex.

#include <cstdint>
#include <mutex>
#include <string>

#include "apps/ddp-train/mlp.hpp"
#include "apps/ddp-train/optimizer.hpp"
#include "apps/ddp-train/train_state.hpp"
#include "ddp/checkpoint.hpp"

namespace ddp::train {

// What a commit says beside the tensors: where training stood and at which world size.
using CommitPosition = PositionAtWorld;

// The micro-batch position in an epoch at `new_world` ranks that visits no sample twice and
// skips none of those not yet visited at `old_world` ranks, to within one micro-batch: micro-batch
// m of every rank covers positions [m * B * W, (m + 1) * B * W) of the epoch's permutation, so
// m' = floor(m * W / W').
std::int64_t reshard_micro(std::int64_t micro, int old_world, int new_world);

class TrainCommit {
 public:
  // `model` and `optimizer` must outlive this; `meta` carries the run's fixed metadata (batch
  // size, optimizer name, seed, ...), as make_checkpoint writes it.
  TrainCommit(Mlp& model, Optimizer& optimizer, Checkpoint meta);

  // Copies the host model and optimizer state (the caller brought them to the host first) and
  // `at`; counts one commit, or sets the count to `commits` when given (after a sync).
  void take(const CommitPosition& at, std::int64_t commits = -1);
  // Copies the last commit back into the host model and optimizer; returns its position.
  CommitPosition restore();
  std::int64_t count() const;

  // The last commit as a checkpoint, "commits" in its metadata.
  Checkpoint checkpoint() const;
  // Makes a checkpoint() of another process this commit (restore() then returns to it). Throws
  // ConfigError naming the mismatch (another model, another optimizer).
  void load(const Checkpoint& ckpt);

 private:
  Mlp& model_;
  Optimizer& optimizer_;
  mutable std::mutex mutex_;
  Checkpoint saved_;  // tensors, metadata (position, world, commits) of the last commit
  std::int64_t commits_ = 0;
};

}  // namespace ddp::train
