// SGD and AdamW, element for element as torch.optim (PyTorch 1.13, foreach=False).

#include "apps/ddp-train/optimizer.hpp"

#include <fmt/format.h>

#include <cmath>

#include "ddp/error.hpp"

namespace ddp::train {
namespace {

// State buffers shaped like the parameters, named "<prefix>.<param name>".
struct StateBuffers {
  std::vector<std::vector<float>> buffers;
  std::vector<StateTensor> tensors;

  StateBuffers(const std::string& prefix, const std::vector<Parameter>& params) {
    buffers.reserve(params.size());
    for (const Parameter& p : params) {
      buffers.emplace_back(p.count, 0.0f);
      tensors.push_back({prefix + "." + p.name, p.shape, buffers.back().data(), p.count});
    }
  }
};

class Sgd : public Optimizer {
 public:
  Sgd(const OptimizerOptions& o, const std::vector<Parameter>& params)
      : o_(o), momentum_("sgd.momentum", params) {}

  void step(std::vector<Parameter>& params, std::int64_t step) override {
    // Branch-free loops over restrict pointers so that the compiler vectorises them: the update
    // is memory-bound and otherwise costs as much as a GEMM of the default model.
    const float lr = o_.lr;
    const float wd = o_.weight_decay;
    const float mu = o_.momentum;
    for (std::size_t k = 0; k < params.size(); ++k) {
      const std::size_t n = params[k].count;
      float* __restrict value = params[k].value;
      float* __restrict grad = params[k].grad;
      float* __restrict buf = momentum_.buffers[k].data();
      if (wd != 0.0f) {
        for (std::size_t i = 0; i < n; ++i) grad[i] += wd * value[i];
      }
      if (mu == 0.0f) {
        for (std::size_t i = 0; i < n; ++i) value[i] -= lr * grad[i];
      } else if (step == 1) {
        // torch: the first step initialises the buffer with the gradient itself.
        for (std::size_t i = 0; i < n; ++i) {
          buf[i] = grad[i];
          value[i] -= lr * grad[i];
        }
      } else {
        for (std::size_t i = 0; i < n; ++i) {
          buf[i] = mu * buf[i] + grad[i];
          value[i] -= lr * buf[i];
        }
      }
    }
  }

  std::vector<StateTensor> state() override { return momentum_.tensors; }

 private:
  OptimizerOptions o_;
  StateBuffers momentum_;
};

class AdamW : public Optimizer {
 public:
  AdamW(const OptimizerOptions& o, const std::vector<Parameter>& params)
      : o_(o), exp_avg_("adamw.exp_avg", params), exp_avg_sq_("adamw.exp_avg_sq", params) {}

  void step(std::vector<Parameter>& params, std::int64_t step) override {
    const auto t = static_cast<double>(step);
    const float bias1 = static_cast<float>(1.0 - std::pow(static_cast<double>(o_.beta1), t));
    const float bias2 = static_cast<float>(1.0 - std::pow(static_cast<double>(o_.beta2), t));
    const float step_size = o_.lr / bias1;
    const float bias2_sqrt = std::sqrt(bias2);
    const float decay = 1.0f - o_.lr * o_.weight_decay;
    const float b1 = o_.beta1;
    const float b2 = o_.beta2;
    const float eps = o_.eps;
    for (std::size_t k = 0; k < params.size(); ++k) {
      const std::size_t n = params[k].count;
      float* __restrict value = params[k].value;
      const float* __restrict grad = params[k].grad;
      float* __restrict m = exp_avg_.buffers[k].data();
      float* __restrict v = exp_avg_sq_.buffers[k].data();
      for (std::size_t i = 0; i < n; ++i) {
        const float g = grad[i];
        value[i] *= decay;
        m[i] += (g - m[i]) * (1.0f - b1);
        v[i] = v[i] * b2 + (1.0f - b2) * g * g;
        const float denom = std::sqrt(v[i]) / bias2_sqrt + eps;
        value[i] -= step_size * m[i] / denom;
      }
    }
  }

  std::vector<StateTensor> state() override {
    std::vector<StateTensor> all = exp_avg_.tensors;
    all.insert(all.end(), exp_avg_sq_.tensors.begin(), exp_avg_sq_.tensors.end());
    return all;
  }

 private:
  OptimizerOptions o_;
  StateBuffers exp_avg_;
  StateBuffers exp_avg_sq_;
};

}  // namespace

std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& options,
                                          const std::vector<Parameter>& params) {
  if (options.name == "sgd") return std::make_unique<Sgd>(options, params);
  if (options.name == "adamw") return std::make_unique<AdamW>(options, params);
  throw ConfigError(
      fmt::format("--optimizer: unknown optimizer '{}' (sgd or adamw)", options.name));
}

}  // namespace ddp::train
