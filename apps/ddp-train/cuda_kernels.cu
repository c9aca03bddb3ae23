// Element-wise and per-row kernels of the CUDA engine, written to match the CPU model's and
// optimizers' arithmetic (same formulas, same order inside an element).

#include <cuda_runtime.h>

#include <string>

#include "apps/ddp-train/cuda_kernels.hpp"
#include "ddp/error.hpp"

namespace ddp::train::cuda {
namespace {

constexpr int kThreads = 256;
constexpr std::size_t kMaxBlocks = 4096;  // grid-stride loops cover the rest

unsigned blocks_for(std::size_t n) {
  const std::size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

void check_launch(const char* kernel) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    throw IoError(std::string("CUDA kernel ") + kernel + ": " + cudaGetErrorString(e));
  }
}

__global__ void gather_rows_kernel(const float* images, const std::int32_t* labels,
                                   const std::int64_t* order, std::size_t n, int features,
                                   float* out, std::int32_t* out_labels) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t r = i / features;
    const std::size_t f = i % features;
    const auto row = static_cast<std::size_t>(order[r]);
    out[i] = images[row * features + f];
    if (f == 0) out_labels[r] = labels[row];
  }
}

__global__ void add_row_results_kernel(const double* row_loss, const std::int32_t* row_correct,
                                       int rows, double* totals) {
  __shared__ double loss[kThreads];
  __shared__ double correct[kThreads];
  double l = 0;
  double c = 0;
  for (int r = threadIdx.x; r < rows; r += kThreads) {
    l += row_loss[r];
    c += row_correct[r];
  }
  loss[threadIdx.x] = l;
  correct[threadIdx.x] = c;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      loss[threadIdx.x] += loss[threadIdx.x + half];
      correct[threadIdx.x] += correct[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    totals[0] += loss[0];
    totals[1] += correct[0];
  }
}

__global__ void add_bias_kernel(float* out, const float* bias, std::size_t n, int cols, bool relu) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const float v = out[i] + bias[i % cols];
    out[i] = relu ? fmaxf(v, 0.0f) : v;
  }
}

__global__ void softmax_cross_entropy_kernel(const float* logits, const std::int32_t* labels,
                                             int rows, int classes, float* probs, double* row_loss,
                                             std::int32_t* row_correct) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* z = logits + static_cast<std::size_t>(r) * classes;
  float* p = probs + static_cast<std::size_t>(r) * classes;
  int argmax = 0;
  for (int c = 1; c < classes; ++c) {
    if (z[c] > z[argmax]) argmax = c;
  }
  const float zmax = z[argmax];
  double denom = 0;
  for (int c = 0; c < classes; ++c) {
    p[c] = expf(z[c] - zmax);
    denom += p[c];
  }
  for (int c = 0; c < classes; ++c) p[c] = static_cast<float>(p[c] / denom);
  const int label = labels[r];
  row_loss[r] = log(denom) - static_cast<double>(z[label] - zmax);
  row_correct[r] = argmax == label ? 1 : 0;
}

__global__ void cross_entropy_delta_kernel(const float* probs, const std::int32_t* labels,
                                           std::size_t n, int classes, float scale, float* delta) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const int c = static_cast<int>(i % classes);
    const int label = labels[i / classes];
    delta[i] = (probs[i] - (c == label ? 1.0f : 0.0f)) * scale;
  }
}

__global__ void relu_mask_kernel(float* delta, const float* act, std::size_t n) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    if (act[i] <= 0.0f) delta[i] = 0.0f;
  }
}

__global__ void fill_kernel(float* x, float value, std::size_t n) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    x[i] = value;
  }
}

__global__ void sgd_kernel(float* value, float* grad, float* buf, std::size_t n, float lr, float wd,
                           float mu, bool first) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    float g = grad[i];
    if (wd != 0.0f) {
      g += wd * value[i];
      grad[i] = g;
    }
    if (mu == 0.0f) {
      value[i] -= lr * g;
    } else if (first) {
      buf[i] = g;
      value[i] -= lr * g;
    } else {
      const float b = mu * buf[i] + g;
      buf[i] = b;
      value[i] -= lr * b;
    }
  }
}

__global__ void adamw_kernel(float* value, const float* grad, float* m, float* v, std::size_t n,
                             AdamWStep s) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const float g = grad[i];
    float x = value[i] * s.decay;
    const float mi = m[i] + (g - m[i]) * (1.0f - s.beta1);
    const float vi = v[i] * s.beta2 + (1.0f - s.beta2) * g * g;
    const float denom = sqrtf(vi) / s.bias2_sqrt + s.eps;
    x -= s.step_size * mi / denom;
    m[i] = mi;
    v[i] = vi;
    value[i] = x;
  }
}

}  // namespace

void gather_rows(const float* images, const std::int32_t* labels, const std::int64_t* order,
                 int rows, int features, float* out, std::int32_t* out_labels) {
  const std::size_t n = static_cast<std::size_t>(rows) * features;
  gather_rows_kernel<<<blocks_for(n), kThreads>>>(images, labels, order, n, features, out,
                                                  out_labels);
  check_launch("gather_rows");
}

void add_row_results(const double* row_loss, const std::int32_t* row_correct, int rows,
                     double* totals) {
  add_row_results_kernel<<<1, kThreads>>>(row_loss, row_correct, rows, totals);
  check_launch("add_row_results");
}

void add_bias(float* out, const float* bias, int rows, int cols, bool relu) {
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  add_bias_kernel<<<blocks_for(n), kThreads>>>(out, bias, n, cols, relu);
  check_launch("add_bias");
}

void softmax_cross_entropy(const float* logits, const std::int32_t* labels, int rows, int classes,
                           float* probs, double* row_loss, std::int32_t* row_correct) {
  const unsigned blocks = static_cast<unsigned>((rows + kThreads - 1) / kThreads);
  softmax_cross_entropy_kernel<<<blocks, kThreads>>>(logits, labels, rows, classes, probs, row_loss,
                                                     row_correct);
  check_launch("softmax_cross_entropy");
}

void cross_entropy_delta(const float* probs, const std::int32_t* labels, int rows, int classes,
                         float scale, float* delta) {
  const std::size_t n = static_cast<std::size_t>(rows) * classes;
  cross_entropy_delta_kernel<<<blocks_for(n), kThreads>>>(probs, labels, n, classes, scale, delta);
  check_launch("cross_entropy_delta");
}

void relu_mask(float* delta, const float* act, std::size_t n) {
  relu_mask_kernel<<<blocks_for(n), kThreads>>>(delta, act, n);
  check_launch("relu_mask");
}

void fill(float* x, float value, std::size_t n) {
  fill_kernel<<<blocks_for(n), kThreads>>>(x, value, n);
  check_launch("fill");
}

void sgd_step(float* value, float* grad, float* momentum_buf, std::size_t n, float lr,
              float weight_decay, float momentum, bool first_step) {
  sgd_kernel<<<blocks_for(n), kThreads>>>(value, grad, momentum_buf, n, lr, weight_decay, momentum,
                                          first_step);
  check_launch("sgd_step");
}

void adamw_step(float* value, const float* grad, float* exp_avg, float* exp_avg_sq, std::size_t n,
                const AdamWStep& s) {
  adamw_kernel<<<blocks_for(n), kThreads>>>(value, grad, exp_avg, exp_avg_sq, n, s);
  check_launch("adamw_step");
}

}  // namespace ddp::train::cuda
