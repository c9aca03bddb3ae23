// TrainCommit. A commit reuses its buffers (assign keeps their capacity), so a commit per step
// costs a copy of the model and optimizer state and no allocation after the first.

#include "apps/ddp-train/train_commit.hpp"

#include <fmt/format.h>

#include <string>

#include "ddp/error.hpp"

namespace ddp::train {

std::int64_t reshard_micro(std::int64_t micro, int old_world, int new_world) {
  return micro * old_world / new_world;
}

TrainCommit::TrainCommit(Mlp& model, Optimizer& optimizer, Checkpoint meta)
    : model_(model), optimizer_(optimizer), saved_(std::move(meta)) {}

void TrainCommit::take(const CommitPosition& at, std::int64_t commits) {
  std::lock_guard lock(mutex_);
  for (const Parameter& p : model_.parameters()) {
    CheckpointTensor& t = saved_.tensors[p.name];
    t.shape = p.shape;
    t.data.assign(p.value, p.value + p.count);
  }
  for (const StateTensor& s : optimizer_.state()) {
    CheckpointTensor& t = saved_.tensors["optimizer." + s.name];
    t.shape = s.shape;
    t.data.assign(s.data, s.data + s.count);
  }
  commits_ = commits >= 0 ? commits : commits_ + 1;
  auto& m = saved_.metadata;
  m.insert_or_assign("epoch", std::to_string(at.pos.epoch));
  m.insert_or_assign("step", std::to_string(at.pos.step));
  m.insert_or_assign("micro_in_epoch", std::to_string(at.pos.micro_in_epoch));
  m.insert_or_assign("world_size", std::to_string(at.world_size));
  m.insert_or_assign("commits", std::to_string(commits_));
}

CommitPosition TrainCommit::restore() {
  std::lock_guard lock(mutex_);
  return copy_state(saved_, model_, optimizer_);
}

std::int64_t TrainCommit::count() const {
  std::lock_guard lock(mutex_);
  return commits_;
}

Checkpoint TrainCommit::checkpoint() const {
  std::lock_guard lock(mutex_);
  return saved_;
}

void TrainCommit::load(const Checkpoint& ckpt) {
  std::lock_guard lock(mutex_);
  // Every tensor and metadata key of this run's commits must be there, with the same shapes.
  for (const auto& [name, t] : saved_.tensors) {
    const auto it = ckpt.tensors.find(name);
    if (it == ckpt.tensors.end()) throw ConfigError(fmt::format("commit has no tensor {}", name));
    if (it->second.shape != t.shape || it->second.data.size() != t.data.size()) {
      throw ConfigError(fmt::format("commit's tensor {} has shape {}, the model's is {}", name,
                                    shape_string(it->second.shape), shape_string(t.shape)));
    }
  }
  for (const char* key : {"optimizer", "widths"}) {
    if (ckpt.meta(key) != saved_.meta(key)) {
      throw ConfigError(fmt::format("commit's {} is {}, this run's is {}", key, ckpt.meta(key),
                                    saved_.meta(key)));
    }
  }
  saved_ = ckpt;
  commits_ = saved_.meta_int("commits");
}

}  // namespace ddp::train
