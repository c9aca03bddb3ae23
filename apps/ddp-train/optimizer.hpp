#pragma once
// Optimizers with PyTorch's update rules: SGD with momentum (torch.optim.SGD) and AdamW
// (torch.optim.AdamW). Their state tensors are named so that checkpoints can carry them.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "apps/ddp-train/mlp.hpp"

namespace ddp::train {

struct OptimizerOptions {
  std::string name = "sgd";  // "sgd" or "adamw"
  float lr = 0.05f;
  float momentum = 0.9f;      // sgd
  float weight_decay = 0.0f;  // sgd: L2 added to the gradient; adamw: decoupled (default 0.01)
  float beta1 = 0.9f;         // adamw
  float beta2 = 0.999f;
  float eps = 1e-8f;
};

// One named state tensor of an optimizer ("sgd.momentum.0.weight"), aliasing its storage.
struct StateTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  float* data = nullptr;
  std::size_t count = 0;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Updates every parameter from its gradient; `step` counts optimizer steps from 1.
  virtual void step(std::vector<Parameter>& params, std::int64_t step) = 0;
  // The state to checkpoint (and to fill when resuming).
  virtual std::vector<StateTensor> state() = 0;
};

// Builds the optimizer `options.name` for `params`. Throws ConfigError naming --optimizer.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& options,
                                          const std::vector<Parameter>& params);

}  // namespace ddp::train
