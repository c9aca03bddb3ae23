#pragma once
// Trainer: one rank's training run (the caller joins the job through ddp::init() when a launcher
// started the process, or passes no group to train alone). Rank 0 resumes from --checkpoint and
// broadcasts parameters, optimizer state and position to every rank, then the trainer runs the
// epochs with a DistributedSampler, the bucketing Reducer, periodic rank-0 checkpoints and a
// sharded test evaluation per epoch. Rank 0 prints progress lines and a last summary line.

#include <cstdint>
#include <memory>
#include <vector>

#include "apps/ddp-train/engine.hpp"
#include "apps/ddp-train/fashion_mnist.hpp"
#include "apps/ddp-train/mlp.hpp"
#include "apps/ddp-train/optimizer.hpp"
#include "apps/ddp-train/train_options.hpp"
#include "apps/ddp-train/train_state.hpp"
#include "ddp/process_group.hpp"
#include "ddp/reducer.hpp"

namespace ddp::train {

// Sums over ranks of what a rank measured (loss, correct answers, samples).
struct Tally {
  double loss_sum = 0;
  double correct = 0;
  double count = 0;
};

class Trainer {
 public:
  // `group` is null for a run without a launcher (world size 1). `local_rank` picks the GPU of the
  // CUDA engine (--device). Throws ConfigError naming the flag or file at fault.
  Trainer(const TrainOptions& options, std::shared_ptr<ProcessGroup> group, int local_rank = 0);

  // Trains to the end; returns the process exit code (0), or exits with 3 at the injected fault.
  int run();

 private:
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
  std::int64_t rows_per_epoch_ = 0;  // this rank's share of the training split
  std::int64_t steps_per_epoch_ = 0;
  std::int64_t micro_per_epoch_ = 0;
  double train_seconds_ = 0;
  std::int64_t samples_trained_ = 0;  // by all ranks, in this process's lifetime
  double first_step_seconds_ = 0;
  std::int64_t first_step_samples_ = 0;  // by all ranks; 0 until the first step is done
};

}  // namespace ddp::train
