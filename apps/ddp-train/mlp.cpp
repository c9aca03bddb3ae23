// Mlp forward and backward on OpenBLAS. Backward produces the last layer's gradients first and
// reports them at once, so that a DDP reducer can all-reduce them while earlier layers compute.

#include "apps/ddp-train/mlp.hpp"

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "ddp/error.hpp"

namespace ddp::train {

Mlp::Mlp(std::vector<int> widths) : widths_(std::move(widths)) {
  if (widths_.size() < 2) throw ConfigError("model: needs at least an input and an output width");
  for (int w : widths_) {
    if (w <= 0) throw ConfigError(fmt::format("model: layer width {} must be positive", w));
  }
  const std::size_t layers = num_layers();
  std::size_t total = 0;
  for (std::size_t l = 0; l < layers; ++l) {
    total += static_cast<std::size_t>(widths_[l + 1]) * (static_cast<std::size_t>(widths_[l]) + 1);
  }
  values_.assign(total, 0.0f);
  grads_.assign(total, 0.0f);
  // Values in forward order; gradients in backward order (last layer's bias first) so that the
  // reducer's buckets, formed in reverse parameter order, are contiguous slices of grads_.
  std::size_t value_off = 0;
  std::size_t grad_off = total;
  for (std::size_t l = 0; l < layers; ++l) {
    const auto out = static_cast<std::size_t>(widths_[l + 1]);
    const auto in = static_cast<std::size_t>(widths_[l]);
    const std::string prefix = std::to_string(2 * l);  // nn.Sequential(Linear, ReLU, Linear, ...)
    for (int is_bias = 0; is_bias < 2; ++is_bias) {
      Parameter p;
      p.name = prefix + (is_bias ? ".bias" : ".weight");
      p.count = is_bias ? out : out * in;
      p.shape = is_bias ? std::vector<std::int64_t>{static_cast<std::int64_t>(out)}
                        : std::vector<std::int64_t>{static_cast<std::int64_t>(out),
                                                    static_cast<std::int64_t>(in)};
      p.value = values_.data() + value_off;
      value_off += p.count;
      grad_off -= p.count;
      p.grad = grads_.data() + grad_off;
      params_.push_back(std::move(p));
    }
  }
  acts_.resize(layers + 1);
}

void Mlp::init(std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  for (std::size_t l = 0; l < num_layers(); ++l) {
    const float bound = 1.0f / std::sqrt(static_cast<float>(widths_[l]));
    for (std::size_t k = 0; k < 2; ++k) {
      Parameter& p = params_[2 * l + k];
      for (std::size_t i = 0; i < p.count; ++i) {
        // 24 random bits give an exactly representable uniform in [0, 1).
        const float u = static_cast<float>(gen() >> 40) * (1.0f / 16777216.0f);
        p.value[i] = (2.0f * u - 1.0f) * bound;
      }
    }
  }
}

void Mlp::zero_grad() { std::fill(grads_.begin(), grads_.end(), 0.0f); }

BatchResult Mlp::forward(const float* x, const std::int32_t* labels, int batch) {
  batch_ = batch;
  input_ = x;
  labels_ = labels;
  const std::size_t layers = num_layers();
  const float* in = x;
  for (std::size_t l = 0; l < layers; ++l) {
    const int n_in = widths_[l];
    const int n_out = widths_[l + 1];
    std::vector<float>& out = acts_[l + 1];
    out.resize(static_cast<std::size_t>(batch) * static_cast<std::size_t>(n_out));
    const float* w = params_[2 * l].value;
    const float* b = params_[2 * l + 1].value;
    for (int r = 0; r < batch; ++r) {
      std::copy(b, b + n_out, out.data() + static_cast<std::size_t>(r) * n_out);
    }
    // out (batch x n_out) += in (batch x n_in) * w^T (n_in x n_out)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, n_out, n_in, 1.0f, in, n_in, w,
                n_in, 1.0f, out.data(), n_out);
    if (l + 1 < layers) {
      for (float& v : out) v = std::max(v, 0.0f);
    }
    in = out.data();
  }
  // Softmax cross-entropy per row, with the max subtracted for stability.
  const int classes = widths_.back();
  const std::vector<float>& logits = acts_[layers];
  probs_.resize(logits.size());
  BatchResult result;
  for (int r = 0; r < batch; ++r) {
    const float* z = logits.data() + static_cast<std::size_t>(r) * classes;
    float* p = probs_.data() + static_cast<std::size_t>(r) * classes;
    const int label = labels[r];
    const float zmax = *std::max_element(z, z + classes);
    double denom = 0;
    for (int c = 0; c < classes; ++c) {
      p[c] = std::exp(z[c] - zmax);
      denom += p[c];
    }
    for (int c = 0; c < classes; ++c) p[c] = static_cast<float>(p[c] / denom);
    result.loss_sum += std::log(denom) - static_cast<double>(z[label] - zmax);
    const auto argmax = std::max_element(z, z + classes) - z;
    if (argmax == label) ++result.correct;
  }
  return result;
}

void Mlp::backward(float loss_scale, const std::function<void(std::size_t)>& on_ready,
                   bool accumulate) {
  // Overwriting (beta = 0) instead of zeroing and adding saves a pass over every gradient.
  const float beta = accumulate ? 1.0f : 0.0f;
  const int batch = batch_;
  const std::size_t layers = num_layers();
  const int classes = widths_.back();
  // d(mean loss)/d(logits) = (softmax - onehot) / batch.
  const float scale = loss_scale / static_cast<float>(batch);
  delta_.resize(probs_.size());
  for (int r = 0; r < batch; ++r) {
    for (int c = 0; c < classes; ++c) {
      const std::size_t i = static_cast<std::size_t>(r) * classes + c;
      delta_[i] = (probs_[i] - (c == labels_[r] ? 1.0f : 0.0f)) * scale;
    }
  }
  for (std::size_t l = layers; l-- > 0;) {
    const int n_in = widths_[l];
    const int n_out = widths_[l + 1];
    const float* in = l == 0 ? input_ : acts_[l].data();
    Parameter& w = params_[2 * l];
    Parameter& b = params_[2 * l + 1];
    // dW (n_out x n_in) += delta^T (n_out x batch) * in (batch x n_in)
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n_out, n_in, batch, 1.0f, delta_.data(),
                n_out, in, n_in, beta, w.grad, n_in);
    if (!accumulate) std::fill(b.grad, b.grad + n_out, 0.0f);
    for (int r = 0; r < batch; ++r) {
      const float* d = delta_.data() + static_cast<std::size_t>(r) * n_out;
      for (int o = 0; o < n_out; ++o) b.grad[o] += d[o];
    }
    if (on_ready) {
      on_ready(2 * l + 1);
      on_ready(2 * l);
    }
    if (l == 0) break;
    // delta_prev (batch x n_in) = delta (batch x n_out) * W (n_out x n_in), masked by the ReLU.
    delta_prev_.resize(static_cast<std::size_t>(batch) * n_in);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, n_in, n_out, 1.0f, delta_.data(),
                n_out, w.value, n_in, 0.0f, delta_prev_.data(), n_in);
    const std::vector<float>& act = acts_[l];
    for (std::size_t i = 0; i < delta_prev_.size(); ++i) {
      if (act[i] <= 0.0f) delta_prev_[i] = 0.0f;
    }
    delta_.swap(delta_prev_);
  }
}

}  // namespace ddp::train
