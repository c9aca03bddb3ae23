#pragma once
// Trainer: one rank's training run (the caller joins the job through ddp::init() when a launcher
// started the process, or passes no group to train alone). Rank 0 resumes from --checkpoint and
// broadcasts parameters, optimizer state and position to every rank, then the trainer runs the
// epochs with a DistributedSampler, the bucketing Reducer, periodic rank-0 checkpoints and a
// sharded test evaluation per epoch. Rank 0 prints progress lines and a last summary line.
// Under ddprun --recovery=inprocess (a RecoverySession) the trainer commits its state in memory
// after every --commit_every steps; when a peer is lost or the agent announces a new round it
// restores the last commit, joins the new round, syncs every rank to the most-committed state
// and goes on from that step, with the sampler re-sharded to the new world.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "apps/ddp-train/engine.hpp"
#include "apps/ddp-train/fashion_mnist.hpp"
#include "apps/ddp-train/mlp.hpp"
#include "apps/ddp-train/optimizer.hpp"
#include "apps/ddp-train/recovery_session.hpp"
#include "apps/ddp-train/train_commit.hpp"
#include "apps/ddp-train/train_log.hpp"
#include "apps/ddp-train/train_options.hpp"
#include "apps/ddp-train/train_state.hpp"
#include "ddp/process_group.hpp"
#include "ddp/reducer.hpp"

namespace ddp::train {

// Sums over ranks of what a rank measured (loss, correct answers, samples), and of the ranks
// that saw --stop_file.
struct Tally {
  double loss_sum = 0;
  double correct = 0;
  double count = 0;
  double stop = 0;
};

// Writes `line` and a newline to stdout and flushes it (progress lines are read as they come).
void print_line(const std::string& line);

class Trainer {
 public:
  // `group` is null for a run without a launcher (world size 1). `local_rank` picks the GPU of the
  // CUDA engine (--device). `session`: the in-process recovery, or null; it outlives *this.
  // Throws ConfigError naming the flag or file at fault.
  Trainer(const TrainOptions& options, std::shared_ptr<ProcessGroup> group, int local_rank = 0,
          RecoverySession* session = nullptr);

  // Trains to the end; returns the process exit code (0), or exits with 3 at the injected fault.
  int run();

 private:
  void attach(std::shared_ptr<ProcessGroup> group);  // and the shape of an epoch at its size
  // Re-shards pos_ (counted at pos_world_) to this group's world size: a checkpoint or commit
  // of another world goes on where the epoch stood, not past its end.
  void adopt_world();
  void train_to_end();  // epochs, evaluation, checkpoint, summary
  int run_inprocess();  // train_to_end() again after every re-form
  bool resume_commit_file();
  void sync_with_peers();
  void commit_step();
  void check_params();  // --params_crc_every
  // The least and the greatest CRC32 of the ranks' parameters (all-reduced; host values).
  std::pair<std::int64_t, std::int64_t> params_crc_range();
  void train_epoch(std::int64_t epoch);
  std::int64_t train_step();  // one optimizer step; returns the samples this rank trained
  // Over the steps after the first (which pays one-time costs), or the first when it is alone.
  double samples_per_second() const;
  Tally evaluate();
  Tally all_reduce(const Tally& local);
  void save(const TrainPosition& pos);
  void maybe_fail();
  void maybe_hang();  // also --slow_step_ms
  bool is_done() const;

  TrainOptions options_;
  std::shared_ptr<ProcessGroup> group_;
  int rank_ = 0;
  int world_ = 1;
  Dataset train_;
  Dataset test_;
  Mlp model_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<Engine> engine_;  // where forward, backward and the step run (CPU or CUDA)
  std::unique_ptr<Reducer> reducer_;
  TrainPosition pos_;
  RecoverySession* session_ = nullptr;
  std::unique_ptr<TrainCommit> commit_;
  TrainLog train_log_;
  std::int64_t checkpoint_step_ = -1;  // the checkpoint this process resumed from
  bool stop_requested_ = false;        // --stop_file seen by some rank
  int pos_world_ = 1;  // the world size pos_.micro_in_epoch counts micro-batches of
  std::int64_t rows_per_epoch_ = 0;  // this rank's share of the training split
  std::int64_t steps_per_epoch_ = 0;
  std::int64_t micro_per_epoch_ = 0;
  double train_seconds_ = 0;
  std::int64_t samples_trained_ = 0;  // by all ranks, in this process's lifetime
  double first_step_seconds_ = 0;
  std::int64_t first_step_samples_ = 0;  // by all ranks; 0 until the first step is done
};

}  // namespace ddp::train
