#pragma once
// The trainer's small CUDA kernels (cuda_kernels.cu), behind host functions free of CUDA headers.
// Every pointer is device memory; every launch goes to the legacy default stream, where cuBLAS
// runs the GEMMs and after which the NCCL group orders its all-reduces. Each function checks the
// launch and throws IoError naming the kernel.

#include <cstddef>
#include <cstdint>

namespace ddp::train::cuda {

// out row r = images row order[r] and out_labels[r] = labels[order[r]], for r < rows.
void gather_rows(const float* images, const std::int32_t* labels, const std::int64_t* order,
                 int rows, int features, float* out, std::int32_t* out_labels);

// totals[0] += sum of row_loss, totals[1] += sum of row_correct, over `rows` rows (one block, in
// a fixed order: the same sums every run).
void add_row_results(const double* row_loss, const std::int32_t* row_correct, int rows,
                     double* totals);

// out[r][c] += bias[c], then max(., 0) when `relu`.
void add_bias(float* out, const float* bias, int rows, int cols, bool relu);

// Per row: probs = softmax(logits); row_loss = -log probs[label] (in double, as the CPU model);
// row_correct = 1 when the first largest logit is the label's.
void softmax_cross_entropy(const float* logits, const std::int32_t* labels, int rows, int classes,
                           float* probs, double* row_loss, std::int32_t* row_correct);

// delta = (probs - onehot(labels)) * scale.
void cross_entropy_delta(const float* probs, const std::int32_t* labels, int rows, int classes,
                         float scale, float* delta);

// delta[i] = 0 where act[i] <= 0 (ReLU's gradient).
void relu_mask(float* delta, const float* act, std::size_t n);

void fill(float* x, float value, std::size_t n);

// torch.optim.SGD for one parameter (grad gains weight decay in place, as on the CPU).
void sgd_step(float* value, float* grad, float* momentum_buf, std::size_t n, float lr,
              float weight_decay, float momentum, bool first_step);

// torch.optim.AdamW for one parameter; the scalars are those of the CPU AdamW for this step.
struct AdamWStep {
  float decay;  // 1 - lr * weight_decay
  float beta1;
  float beta2;
  float step_size;   // lr / (1 - beta1^t)
  float bias2_sqrt;  // sqrt(1 - beta2^t)
  float eps;
};
void adamw_step(float* value, const float* grad, float* exp_avg, float* exp_avg_sq, std::size_t n,
                const AdamWStep& s);

}  // namespace ddp::train::cuda
