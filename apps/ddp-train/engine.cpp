// The CPU engine (the host model and optimizer do the work) and the choice of engine.

#include "apps/ddp-train/engine.hpp"

#include <fmt/format.h>

#include "ddp/devices.hpp"
#include "ddp/error.hpp"

namespace ddp::train {
namespace {

class CpuEngine : public Engine {
 public:
  CpuEngine(Mlp& model, Optimizer& optimizer) : model_(model), optimizer_(optimizer) {}

  std::string device() const override { return "cpu"; }

  BatchResult forward(const float* x, const std::int32_t* labels, int batch) override {
    return model_.forward(x, labels, batch);
  }

  void backward(float loss_scale, const std::function<void(std::size_t)>& on_ready,
                bool accumulate) override {
    model_.backward(loss_scale, on_ready, accumulate);
  }

  void step(std::int64_t step) override { optimizer_.step(model_.parameters(), step); }

  std::vector<GradientSlot> gradient_slots() override {
    std::vector<GradientSlot> slots;
    for (const Parameter& p : model_.parameters()) slots.push_back({p.name, p.grad, p.count});
    return slots;
  }

  std::vector<Tensor> state_tensors() override {
    std::vector<Tensor> tensors{{model_.flat_values().data(), model_.flat_values().size()}};
    for (const StateTensor& s : optimizer_.state()) tensors.push_back({s.data, s.count});
    return tensors;
  }

  void load_from_host() override {}
  void store_to_host() override {}

  void exchange(Tensor host, const std::function<std::shared_ptr<Work>(Tensor)>& op) override {
    op(host)->wait();
  }

 private:
  Mlp& model_;
  Optimizer& optimizer_;
};

}  // namespace

std::unique_ptr<Engine> make_engine(const EngineChoice& choice, Mlp& model, Optimizer& optimizer,
                                    const OptimizerOptions& options) {
  bool cuda = false;
  if (choice.device == "auto") {
    cuda = choice.group_backend.empty()
               ? built_with_cuda() && visible_cuda_devices() > 0
               : choice.group_backend == "nccl";
  } else if (choice.device == "cuda") {
    if (!built_with_cuda()) {
      throw ConfigError("--device cuda: this ddp-train was built without CUDA");
    }
    const int visible = visible_cuda_devices();
    if (visible <= choice.local_rank) {
      throw ConfigError(fmt::format(
          "--device cuda: local rank {} needs GPU {}, but {} GPU(s) are visible (no driver, or "
          "CUDA_VISIBLE_DEVICES?)",
          choice.local_rank, choice.local_rank, visible));
    }
    if (choice.group_backend == "gloo") {
      throw ConfigError("--device cuda: the gloo backend reduces host memory; use --backend nccl");
    }
    cuda = true;
  } else if (choice.device == "cpu") {
    if (choice.group_backend == "nccl") {
      throw ConfigError("--device cpu: the nccl backend reduces device memory; use --backend gloo");
    }
  } else {
    throw ConfigError(
        fmt::format("--device: unknown device '{}' (auto, cpu or cuda)", choice.device));
  }
  if (cuda) return make_cuda_engine(choice.local_rank, model, optimizer, options);
  return std::make_unique<CpuEngine>(model, optimizer);
}

}  // namespace ddp::train
