// The CPU engine (the host model and optimizer do the work) and the choice of engine.

#include "apps/ddp-train/engine.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "ddp/devices.hpp"
#include "ddp/error.hpp"

namespace ddp::train {
namespace {

class CpuEngine : public Engine {
 public:
  CpuEngine(Mlp& model, Optimizer& optimizer) : model_(model), optimizer_(optimizer) {}

  std::string device() const override { return "cpu"; }

  void attach(const Dataset& train, const Dataset& test) override {
    train_ = &train;
    test_ = &test;
  }

  void set_train_order(const std::vector<std::int64_t>& order) override { order_ = order; }

  void forward(Split split, std::int64_t first, int count) override {
    BatchResult r;
    if (split == Split::kTest) {
      r = model_.forward(test_->row(first), test_->labels.data() + first, count);
    } else {
      gather(first, count);
      r = model_.forward(batch_x_.data(), batch_y_.data(), count);
    }
    results_.loss_sum += r.loss_sum;
    results_.correct += r.correct;
  }

  BatchResult take_results() override { return std::exchange(results_, BatchResult{}); }

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
  // Copies the training rows order_[first ..) into one contiguous batch.
  void gather(std::int64_t first, int count) {
    const auto features = static_cast<std::size_t>(train_->features);
    batch_x_.resize(static_cast<std::size_t>(count) * features);
    batch_y_.resize(static_cast<std::size_t>(count));
    for (int r = 0; r < count; ++r) {
      const std::int64_t i = order_[static_cast<std::size_t>(first + r)];
      std::copy(train_->row(i), train_->row(i) + features,
                batch_x_.data() + static_cast<std::size_t>(r) * features);
      batch_y_[static_cast<std::size_t>(r)] = train_->labels[static_cast<std::size_t>(i)];
    }
  }

  Mlp& model_;
  Optimizer& optimizer_;
  const Dataset* train_ = nullptr;
  const Dataset* test_ = nullptr;
  std::vector<std::int64_t> order_;
  std::vector<float> batch_x_;
  std::vector<std::int32_t> batch_y_;
  BatchResult results_;
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
