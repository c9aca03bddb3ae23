#pragma once
// Where training stands (epoch, step, position in the epoch) and its round trip through a
// checkpoint together with the model and optimizer state.

#include <cstdint>
#include <string>

#include "apps/ddp-train/mlp.hpp"
#include "apps/ddp-train/optimizer.hpp"
#include "ddp/checkpoint.hpp"

namespace ddp::train {

struct TrainPosition {
  std::int64_t epoch = 0;           // current epoch, from 0
  std::int64_t step = 0;            // optimizer steps done, over all epochs
  std::int64_t micro_in_epoch = 0;  // micro-batches of this rank's sampler already consumed
};

// A position and the world size its micro-batch count is in (a checkpoint's or a commit's): at
// another world size it is re-sharded (reshard_micro in train_commit.hpp).
struct PositionAtWorld {
  TrainPosition pos;
  int world_size = 1;
};

// Weights under their PyTorch state_dict names, optimizer state, and metadata: format, epoch,
// step, micro_in_epoch, world_size, batch_size, grad_accum, optimizer, seed, widths.
Checkpoint make_checkpoint(const Mlp& model, Optimizer& optimizer, const TrainPosition& pos,
                           int world_size, int batch_size, int grad_accum,
                           const std::string& optimizer_name, std::uint64_t seed);

// Copies `ckpt`'s weights and optimizer state into `model` and `optimizer` (the caller checked
// that they are of this model and optimizer) and returns its position and world size.
PositionAtWorld copy_state(const Checkpoint& ckpt, Mlp& model, Optimizer& optimizer);

// Loads weights and optimizer state into `model` and `optimizer` and returns the position and the
// world size it was saved at. Throws ConfigError naming the file and the mismatch (another model
// shape, another optimizer).
PositionAtWorld restore_checkpoint(const std::string& path, Mlp& model, Optimizer& optimizer,
                                 const std::string& optimizer_name);

}  // namespace ddp::train
