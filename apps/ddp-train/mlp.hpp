#pragma once
// Mlp: the trainer's model, a ReLU multilayer perceptron with a softmax cross-entropy loss, in
// float32 on the CPU with OpenBLAS GEMMs. Layouts follow torch.nn.Linear (weight is out x in).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ddp::train {

// One parameter tensor: its PyTorch state_dict name ("0.weight" for an nn.Sequential of Linear
// and ReLU layers), shape, and pointers into the model's flat value and gradient buffers.
struct Parameter {
  std::string name;
  std::vector<std::int64_t> shape;
  float* value = nullptr;
  float* grad = nullptr;
  std::size_t count = 0;
};

// What one forward pass over a batch gives: the summed loss and the number of correct argmaxes.
struct BatchResult {
  double loss_sum = 0;
  std::int64_t correct = 0;
};

class Mlp {
 public:
  // widths = {inputs, hidden..., classes}; at least two entries, all positive. Throws ConfigError.
  explicit Mlp(std::vector<int> widths);
  Mlp(const Mlp&) = delete;
  Mlp& operator=(const Mlp&) = delete;

  // torch.nn.Linear's default init (weights and biases uniform in +-1/sqrt(fan_in)), drawn from a
  // generator seeded with `seed`: the same seed gives the same model on every rank.
  void init(std::uint64_t seed);

  // Parameters in forward order: layer 0 weight, layer 0 bias, layer 1 weight, ... Gradients are
  // laid out in the flat buffer in the reverse order so that consecutive parameters of a backward
  // bucket are adjacent in memory.
  std::vector<Parameter>& parameters() { return params_; }
  const std::vector<Parameter>& parameters() const { return params_; }
  std::vector<float>& flat_values() { return values_; }
  std::vector<float>& flat_grads() { return grads_; }
  std::size_t num_layers() const { return widths_.size() - 1; }
  const std::vector<int>& widths() const { return widths_; }

  // Forward over `batch` rows of `x` (batch x widths[0]); keeps the activations for backward.
  BatchResult forward(const float* x, const std::int32_t* labels, int batch);

  // Computes d(loss_scale * mean loss)/d(param) into every gradient, added to what is there when
  // `accumulate` (gradient accumulation), else overwriting it. Calls on_ready(i) for parameter i
  // as soon as its gradient is final, the last layer first; the caller may start communicating
  // it while backward continues. REQUIRES: forward() ran on this batch.
  void backward(float loss_scale, const std::function<void(std::size_t)>& on_ready,
                bool accumulate = true);

  void zero_grad();

 private:
  std::vector<int> widths_;
  std::vector<float> values_;
  std::vector<float> grads_;
  std::vector<Parameter> params_;
  // Per-batch workspace: acts_[0] is the input copy, acts_[l + 1] the output of layer l (after
  // ReLU except for the last); delta_ holds the gradient flowing back.
  int batch_ = 0;
  const float* input_ = nullptr;
  const std::int32_t* labels_ = nullptr;
  std::vector<std::vector<float>> acts_;
  std::vector<float> probs_;
  std::vector<float> delta_;
  std::vector<float> delta_prev_;
};

}  // namespace ddp::train
