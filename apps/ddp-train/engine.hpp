#pragma once
// Engine: where the model's math runs. The trainer owns the host model and optimizer (layout,
// init, checkpoints) and drives an engine for forward, backward and the optimizer step.
// CpuEngine computes on the host model itself (OpenBLAS); the CUDA engine computes on device
// copies of it (cuBLAS and small kernels, cuda_engine.cpp) and copies back for checkpoints.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "apps/ddp-train/mlp.hpp"
#include "apps/ddp-train/optimizer.hpp"
#include "ddp/process_group.hpp"
#include "ddp/reducer.hpp"

namespace ddp::train {

class Engine {
 public:
  virtual ~Engine() = default;

  virtual std::string device() const = 0;  // "cpu" or "cuda:<index>"

  // As Mlp::forward and Mlp::backward; x and labels are host memory.
  virtual BatchResult forward(const float* x, const std::int32_t* labels, int batch) = 0;
  virtual void backward(float loss_scale, const std::function<void(std::size_t)>& on_ready,
                        bool accumulate) = 0;
  // One optimizer step over every parameter (steps count from 1).
  virtual void step(std::int64_t step) = 0;

  // The gradients as the reducer must see them, in the model's parameter order.
  virtual std::vector<GradientSlot> gradient_slots() = 0;
  // Model values, then optimizer state: what rank 0 broadcasts at start.
  virtual std::vector<Tensor> state_tensors() = 0;

  // Host model and optimizer -> engine (after init or a restore), and back (before a checkpoint).
  virtual void load_from_host() = 0;
  virtual void store_to_host() = 0;

  // Runs `op` on a few host values (metrics, the training position) and waits for it; through
  // device memory when the engine's group needs it (NCCL).
  virtual void exchange(Tensor host, const std::function<std::shared_ptr<Work>(Tensor)>& op) = 0;
};

// What the engine is built from. `device`: "auto" (CUDA when the group is NCCL's, or with no group
// when ddp-train was built with CUDA and a GPU is visible), "cpu" or "cuda".
struct EngineChoice {
  std::string device = "auto";
  std::string group_backend;  // "" without a group, else the group's ("gloo" or "nccl")
  int local_rank = 0;         // the CUDA device
};

// Throws ConfigError naming --device when the choice cannot work (no GPU, a build without CUDA,
// CPU tensors for NCCL or device tensors for Gloo).
std::unique_ptr<Engine> make_engine(const EngineChoice& choice, Mlp& model, Optimizer& optimizer,
                                    const OptimizerOptions& options);

// The CUDA engine on device `device_index`: cuda_engine.cpp, or cuda_engine_none.cpp in a build
// without CUDA (which throws ConfigError).
std::unique_ptr<Engine> make_cuda_engine(int device_index, Mlp& model, Optimizer& optimizer,
                                         const OptimizerOptions& options);

}  // namespace ddp::train
