// Checkpoint <-> model/optimizer. The widths go in the metadata too, so a checkpoint of another
// model shape is reported as such before any tensor is compared.

#include "apps/ddp-train/train_state.hpp"

#include <fmt/format.h>

#include "ddp/error.hpp"

namespace ddp::train {
namespace {

constexpr const char* kFormat = "ddp-train/1";

std::string widths_string(const std::vector<int>& widths) {
  return fmt::format("{}", fmt::join(widths, "-"));
}

}  // namespace

Checkpoint make_checkpoint(const Mlp& model, Optimizer& optimizer, const TrainPosition& pos,
                           int world_size, int batch_size, int grad_accum,
                           const std::string& optimizer_name, std::uint64_t seed) {
  Checkpoint ckpt;
  for (const Parameter& p : model.parameters()) {
    ckpt.tensors.insert_or_assign(p.name, CheckpointTensor{p.shape, {p.value, p.value + p.count}});
  }
  for (const StateTensor& s : optimizer.state()) {
    ckpt.tensors.insert_or_assign("optimizer." + s.name,
                                  CheckpointTensor{s.shape, {s.data, s.data + s.count}});
  }
  auto& m = ckpt.metadata;
  m.insert_or_assign("format", std::string{kFormat});
  m.insert_or_assign("epoch", std::to_string(pos.epoch));
  m.insert_or_assign("step", std::to_string(pos.step));
  m.insert_or_assign("micro_in_epoch", std::to_string(pos.micro_in_epoch));
  m.insert_or_assign("world_size", std::to_string(world_size));
  m.insert_or_assign("batch_size", std::to_string(batch_size));
  m.insert_or_assign("grad_accum", std::to_string(grad_accum));
  m.insert_or_assign("optimizer", optimizer_name);
  m.insert_or_assign("seed", std::to_string(seed));
  m.insert_or_assign("widths", widths_string(model.widths()));
  return ckpt;
}

PositionAtWorld copy_state(const Checkpoint& ckpt, Mlp& model, Optimizer& optimizer) {
  for (Parameter& p : model.parameters()) ckpt.copy_to(p.name, p.shape, p.value);
  for (const StateTensor& s : optimizer.state()) {
    ckpt.copy_to("optimizer." + s.name, s.shape, s.data);
  }
  PositionAtWorld at;
  at.pos.epoch = ckpt.meta_int("epoch");
  at.pos.step = ckpt.meta_int("step");
  at.pos.micro_in_epoch = ckpt.meta_int("micro_in_epoch");
  at.world_size = static_cast<int>(ckpt.meta_int("world_size"));
  return at;
}

PositionAtWorld restore_checkpoint(const std::string& path, Mlp& model, Optimizer& optimizer,
                                 const std::string& optimizer_name) {
  const Checkpoint ckpt = load_checkpoint(path);
  try {
    const auto it = ckpt.metadata.find("widths");
    if (it != ckpt.metadata.end() && it->second != widths_string(model.widths())) {
      throw ConfigError(fmt::format("model widths are {}, this run's are {}", it->second,
                                    widths_string(model.widths())));
    }
    if (ckpt.meta("optimizer") != optimizer_name) {
      throw ConfigError(
          fmt::format("optimizer is {}, this run's is {}", ckpt.meta("optimizer"), optimizer_name));
    }
    return copy_state(ckpt, model, optimizer);
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("checkpoint {}: {}", path, e.what()));
  }
}

}  // namespace ddp::train
