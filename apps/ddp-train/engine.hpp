#pragma once
// Engine: where the model's math runs. The trainer owns the host model and optimizer (layout,
// init, checkpoints) and drives an engine for forward, backward and the optimizer step.
// CpuEngine computes on the host model itself (OpenBLAS); the CUDA engine computes on device
// copies of it and of the data (cuBLAS and small kernels, cuda_engine.cpp), without waiting for
// the device between steps, and copies back for checkpoints.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "apps/ddp-train/fashion_mnist.hpp"
#include "apps/ddp-train/mlp.hpp"
#include "apps/ddp-train/optimizer.hpp"
#include "ddp/process_group.hpp"
#include "ddp/reducer.hpp"

namespace ddp::train {

enum class Split { kTrain, kTest };

class Engine {
 public:
  virtual ~Engine() = default;

  virtual std::string device() const = 0;  // "cpu" or "cuda:<index>"

  // The splits batches are drawn from, kept by reference for the engine's lifetime (the CUDA
  // engine copies them to the device here, once).
  virtual void attach(const Dataset& train, const Dataset& test) = 0;
  // The order of the training rows for the coming epoch: the sampler's indices.
  virtual void set_train_order(const std::vector<std::int64_t>& order) = 0;
  // As Mlp::forward over `count` rows from position `first`: of the training order (kTrain) or of
  // the test split itself (kTest). Adds the loss and correct answers to the engine's results
  // without waiting for them (see take_results).
  virtual void forward(Split split, std::int64_t first, int count) = 0;
  // The results summed since the last call, which starts the sums again. Waits for the device.
  virtual BatchResult take_results() = 0;
  // As Mlp::backward, on the last forward's batch.
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
