#pragma once
// ddp-train's command line (CLI11). Flags use torchrun-style underscores: --batch_size 64.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "apps/ddp-train/optimizer.hpp"

namespace ddp::train {

struct TrainOptions {
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  std::vector<int> hidden = {1024, 1024};
  int epochs = 1;
  std::int64_t max_steps = 0;  // 0 = no limit
  int batch_size = 64;         // per rank, per micro-step
  int grad_accum = 1;
  std::uint64_t seed = 0;
  bool scale_lr = false;  // lr *= world size
  OptimizerOptions optimizer;
  double bucket_cap_mb = 25.0;
  std::string checkpoint;             // "" = none
  std::int64_t checkpoint_every = 0;  // steps; 0 = only at the end
  std::int64_t fail_at_step = -1;
  int fail_rank = 0;
  std::int64_t hang_at_step = -1;  // fault injection: this rank sleeps forever at this step
  int hang_rank = 0;               // (first attempt only: TORCHELASTIC_RESTART_COUNT 0 or unset)
  std::int64_t slow_step_ms = 0;   // fault injection: --slow_rank sleeps this long every step
  int slow_rank = 0;
  std::int64_t log_every = 100;  // steps between progress lines
  std::string train_log;         // "" = none; rank 0's JSON-lines record of the run (train_log.hpp)
  std::int64_t params_crc_every = 0;  // steps between cross-rank parameter CRC checks; 0 = never
  std::string stop_file;         // "" = none; the run ends cleanly once this file exists
  bool fail_on_sigusr1 = false;  // fault injection: SIGUSR1 makes this process exit 3
  std::string backend;           // "" = libddp's default
  std::string device = "auto";   // auto, cpu or cuda (see EngineChoice)
  // --recovery=inprocess (under ddprun's hand-over channel only): steps between in-memory
  // commits, and seconds a new place may wait for the training thread before the worker gives
  // up its blocked process.
  std::int64_t commit_every = 1;
  double reform_grace = 3.0;
};

// Parses argv. Returns nullopt after printing --help. Throws ConfigError naming the flag.
std::optional<TrainOptions> parse_train_options(int argc, char** argv);

}  // namespace ddp::train
