// The CUDA engine: the model's values, gradients and optimizer state live on one GPU (device =
// LOCAL_RANK), with the host model's layout (the same offsets, gradients in reverse order) so that
// every reducer bucket is one contiguous slice. Both data splits are copied to the device once; a
// training batch is gathered there from the epoch's order. GEMMs go to cuBLAS (FP32, no TF32:
// PyTorch 1.13's default), the rest to cuda_kernels.cu; everything is queued on the legacy default
// stream, which the NCCL group waits for before each all-reduce, so a bucket's all-reduce starts
// while backward goes on queueing earlier layers, and which waits in turn for the all-reduces
// before the optimizer step. Loss and correct answers are summed on the device, so the host never
// waits for a step: only take_results() does. cuBLAS is loaded on first use (cuda_blas.hpp).

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <utility>

#include "apps/ddp-train/cuda_blas.hpp"
#include "apps/ddp-train/cuda_kernels.hpp"
#include "apps/ddp-train/engine.hpp"
#include "common/check.hpp"
#include "ddp/error.hpp"

namespace ddp::train {
namespace {

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw IoError(fmt::format("CUDA {}: {}", what, cudaGetErrorString(e)));
}

void check_blas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    throw IoError(fmt::format("cuBLAS {}: {}", what, cuda::blas().status_string(s)));
  }
}

// Device memory for `capacity` elements of T, grown (never shrunk, contents dropped) on demand.
template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(std::size_t count) { reserve(count); }
  ~DeviceArray() {
    if (data_ != nullptr) cudaFree(data_);
  }
  DeviceArray(DeviceArray&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), capacity_(std::exchange(other.capacity_, 0)) {}
  DeviceArray& operator=(DeviceArray&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(capacity_, other.capacity_);
    return *this;
  }

  // Returns true when it had to grow (the contents are then undefined).
  bool reserve(std::size_t count) {
    if (count <= capacity_) return false;
    if (data_ != nullptr) cudaFree(std::exchange(data_, nullptr));
    check_cuda(cudaMalloc(reinterpret_cast<void**>(&data_), count * sizeof(T)), "cudaMalloc");
    capacity_ = count;
    return true;
  }
  T* data() { return data_; }

 private:
  T* data_ = nullptr;
  std::size_t capacity_ = 0;
};

void to_device(void* dst, const void* src, std::size_t bytes) {
  check_cuda(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "copy to the device");
}

void to_host(void* dst, const void* src, std::size_t bytes) {
  check_cuda(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "copy to the host");
}

class CudaEngine : public Engine {
 public:
  CudaEngine(int device, Mlp& model, Optimizer& optimizer, const OptimizerOptions& options)
      : device_(device), model_(model), optimizer_(optimizer), options_(options) {
    check_cuda(cudaSetDevice(device_), "cudaSetDevice");
    check_blas(blas_.create(&handle_), "cublasCreate");
    // Stream 0 is the legacy default stream: where the NCCL group looks for our work.
    check_blas(blas_.set_stream(handle_, nullptr), "cublasSetStream");
    check_blas(blas_.set_math_mode(handle_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");

    const std::size_t total = model_.flat_values().size();
    values_.reserve(total);
    grads_.reserve(total);
    check_cuda(cudaMemset(grads_.data(), 0, total * sizeof(float)), "cudaMemset");
    for (const Parameter& p : model_.parameters()) {
      value_offsets_.push_back(static_cast<std::size_t>(p.value - model_.flat_values().data()));
      grad_offsets_.push_back(static_cast<std::size_t>(p.grad - model_.flat_grads().data()));
    }
    std::size_t state_total = 0;
    for (const StateTensor& s : optimizer_.state()) {
      state_offsets_.push_back(state_total);
      state_total += s.count;
    }
    const std::size_t per_param = options_.name == "adamw" ? 2 : 1;
    DDP_CHECK(state_offsets_.size() == per_param * value_offsets_.size(),
              "{} optimizer: {} state tensors for {} parameters", options_.name,
              state_offsets_.size(), value_offsets_.size());
    state_.reserve(std::max<std::size_t>(state_total, 1));
    acts_.resize(model_.num_layers() + 1);
    results_.reserve(2);
    check_cuda(cudaMemset(results_.data(), 0, 2 * sizeof(double)), "cudaMemset");
    load_from_host();
  }

  ~CudaEngine() override {
    cudaDeviceSynchronize();  // nothing may still run on memory about to be freed
    blas_.destroy(handle_);
  }

  std::string device() const override { return fmt::format("cuda:{}", device_); }

  void attach(const Dataset& train, const Dataset& test) override {
    train_ = upload(train);
    test_ = upload(test);
  }

  void set_train_order(const std::vector<std::int64_t>& order) override {
    order_.reserve(order.size());
    to_device(order_.data(), order.data(), order.size() * sizeof(std::int64_t));
  }

  void forward(Split split, std::int64_t first, int batch) override {
    const std::vector<int>& widths = model_.widths();
    const std::size_t layers = model_.num_layers();
    const auto rows = static_cast<std::size_t>(batch);
    const auto features = static_cast<std::size_t>(widths[0]);
    reserve_batch(rows);
    batch_ = batch;
    if (split == Split::kTest) {  // contiguous rows: read in place
      batch_input_ = test_.images.data() + static_cast<std::size_t>(first) * features;
      batch_labels_ = test_.labels.data() + first;
    } else {
      cuda::gather_rows(train_.images.data(), train_.labels.data(), order_.data() + first, batch,
                        widths[0], input_.data(), labels_.data());
      batch_input_ = input_.data();
      batch_labels_ = labels_.data();
    }
    const float one = 1.0f;
    const float zero = 0.0f;
    const float* in = batch_input_;
    for (std::size_t l = 0; l < layers; ++l) {
      const int n_in = widths[l];
      const int n_out = widths[l + 1];
      float* out = acts_[l + 1].data();
      // Row-major out (batch x n_out) = in (batch x n_in) * W^T, as column-major
      // out^T = W * in^T where W's row-major storage is column-major W^T.
      check_blas(blas_.sgemm(handle_, CUBLAS_OP_T, CUBLAS_OP_N, n_out, batch, n_in, &one,
                             value(2 * l), n_in, in, n_in, &zero, out, n_out),
                 "sgemm (forward)");
      cuda::add_bias(out, value(2 * l + 1), batch, n_out, l + 1 < layers);
      in = out;
    }
    const int classes = widths.back();
    cuda::softmax_cross_entropy(acts_[layers].data(), batch_labels_, batch, classes, probs_.data(),
                                row_loss_.data(), row_correct_.data());
    cuda::add_row_results(row_loss_.data(), row_correct_.data(), batch, results_.data());
  }

  BatchResult take_results() override {
    double sums[2] = {0, 0};
    to_host(sums, results_.data(), sizeof(sums));
    check_cuda(cudaMemset(results_.data(), 0, sizeof(sums)), "cudaMemset");
    return BatchResult{sums[0], static_cast<std::int64_t>(sums[1])};
  }

  void backward(float loss_scale, const std::function<void(std::size_t)>& on_ready,
                bool accumulate) override {
    const std::vector<int>& widths = model_.widths();
    const std::size_t layers = model_.num_layers();
    const int batch = batch_;
    const float one = 1.0f;
    const float zero = 0.0f;
    const float beta = accumulate ? 1.0f : 0.0f;
    cuda::cross_entropy_delta(probs_.data(), batch_labels_, batch, widths.back(),
                              loss_scale / static_cast<float>(batch), delta_.data());
    for (std::size_t l = layers; l-- > 0;) {
      const int n_in = widths[l];
      const int n_out = widths[l + 1];
      const float* in = l == 0 ? batch_input_ : acts_[l].data();
      // dW (n_out x n_in, row-major) += delta^T * in, as column-major dW^T += in^T * delta.
      check_blas(blas_.sgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_T, n_in, n_out, batch, &one, in, n_in,
                             delta_.data(), n_out, &beta, grad(2 * l), n_in),
                 "sgemm (weight gradient)");
      // db += column sums of delta: delta^T (n_out x batch, column-major as stored) * ones.
      check_blas(blas_.sgemv(handle_, CUBLAS_OP_N, n_out, batch, &one, delta_.data(), n_out,
                             ones_.data(), 1, &beta, grad(2 * l + 1), 1),
                 "sgemv (bias gradient)");
      if (on_ready) {
        on_ready(2 * l + 1);
        on_ready(2 * l);
      }
      if (l == 0) break;
      // delta_prev (batch x n_in) = delta * W, as column-major delta_prev^T = W^T * delta^T.
      check_blas(
          blas_.sgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, n_in, batch, n_out, &one, value(2 * l),
                      n_in, delta_.data(), n_out, &zero, delta_prev_.data(), n_in),
          "sgemm (input gradient)");
      cuda::relu_mask(delta_prev_.data(), acts_[l].data(), static_cast<std::size_t>(batch) * n_in);
      std::swap(delta_, delta_prev_);
    }
  }

  void step(std::int64_t step) override {
    const std::vector<Parameter>& params = model_.parameters();
    const std::size_t n_params = params.size();
    if (options_.name == "adamw") {
      const auto t = static_cast<double>(step);
      const float bias1 =
          static_cast<float>(1.0 - std::pow(static_cast<double>(options_.beta1), t));
      const float bias2 =
          static_cast<float>(1.0 - std::pow(static_cast<double>(options_.beta2), t));
      const cuda::AdamWStep s{1.0f - options_.lr * options_.weight_decay,
                              options_.beta1,
                              options_.beta2,
                              options_.lr / bias1,
                              std::sqrt(bias2),
                              options_.eps};
      for (std::size_t k = 0; k < n_params; ++k) {
        cuda::adamw_step(value(k), grad(k), state(k), state(n_params + k), params[k].count, s);
      }
      return;
    }
    for (std::size_t k = 0; k < n_params; ++k) {
      cuda::sgd_step(value(k), grad(k), state(k), params[k].count, options_.lr,
                     options_.weight_decay, options_.momentum, step == 1);
    }
  }

  std::vector<GradientSlot> gradient_slots() override {
    std::vector<GradientSlot> slots;
    const std::vector<Parameter>& params = model_.parameters();
    for (std::size_t k = 0; k < params.size(); ++k) {
      slots.push_back({params[k].name, grad(k), params[k].count, DeviceKind::kCuda, device_});
    }
    return slots;
  }

  std::vector<Tensor> state_tensors() override {
    std::vector<Tensor> tensors{on_device(values_.data(), model_.flat_values().size())};
    const std::vector<StateTensor> state = optimizer_.state();
    for (std::size_t i = 0; i < state.size(); ++i) {
      tensors.push_back(on_device(this->state(i), state[i].count));
    }
    return tensors;
  }

  void load_from_host() override {
    to_device(values_.data(), model_.flat_values().data(),
              model_.flat_values().size() * sizeof(float));
    const std::vector<StateTensor> state = optimizer_.state();
    for (std::size_t i = 0; i < state.size(); ++i) {
      to_device(this->state(i), state[i].data, state[i].count * sizeof(float));
    }
  }

  void store_to_host() override {
    to_host(model_.flat_values().data(), values_.data(),
            model_.flat_values().size() * sizeof(float));
    const std::vector<StateTensor> state = optimizer_.state();
    for (std::size_t i = 0; i < state.size(); ++i) {
      to_host(state[i].data, this->state(i), state[i].count * sizeof(float));
    }
  }

  void exchange(Tensor host, const std::function<std::shared_ptr<Work>(Tensor)>& op) override {
    scratch_.reserve(host.bytes());
    to_device(scratch_.data(), host.data, host.bytes());
    Tensor device = host;
    device.data = scratch_.data();
    device.device = DeviceKind::kCuda;
    device.device_index = device_;
    op(device)->wait();
    to_host(host.data, scratch_.data(), host.bytes());
  }

 private:
  // A split on the device: what the trainer's batches are read from.
  struct DeviceSplit {
    DeviceArray<float> images;
    DeviceArray<std::int32_t> labels;
  };

  static DeviceSplit upload(const Dataset& split) {
    DeviceSplit d;
    d.images.reserve(std::max<std::size_t>(split.images.size(), 1));
    d.labels.reserve(std::max<std::size_t>(split.labels.size(), 1));
    to_device(d.images.data(), split.images.data(), split.images.size() * sizeof(float));
    to_device(d.labels.data(), split.labels.data(), split.labels.size() * sizeof(std::int32_t));
    return d;
  }

  float* value(std::size_t param) { return values_.data() + value_offsets_[param]; }
  float* grad(std::size_t param) { return grads_.data() + grad_offsets_[param]; }
  float* state(std::size_t index) { return state_.data() + state_offsets_[index]; }

  Tensor on_device(float* data, std::size_t count) const {
    return Tensor{data, count, DType::kFloat32, DeviceKind::kCuda, device_};
  }

  // Per-batch workspaces, grown to the largest batch seen (the evaluation's, usually).
  void reserve_batch(std::size_t rows) {
    const std::vector<int>& widths = model_.widths();
    const auto widest = static_cast<std::size_t>(*std::max_element(widths.begin(), widths.end()));
    input_.reserve(rows * widths[0]);
    labels_.reserve(rows);
    for (std::size_t l = 1; l < acts_.size(); ++l) acts_[l].reserve(rows * widths[l]);
    probs_.reserve(rows * widths.back());
    delta_.reserve(rows * widest);
    delta_prev_.reserve(rows * widest);
    row_loss_.reserve(rows);
    row_correct_.reserve(rows);
    if (ones_.reserve(rows)) cuda::fill(ones_.data(), 1.0f, rows);
  }

  int device_;
  Mlp& model_;
  Optimizer& optimizer_;
  OptimizerOptions options_;
  const cuda::Blas& blas_ = cuda::blas();  // throws before anything is allocated
  cublasHandle_t handle_ = nullptr;
  DeviceArray<float> values_;
  DeviceArray<float> grads_;
  DeviceArray<float> state_;  // every optimizer state tensor, in state() order
  std::vector<std::size_t> value_offsets_;
  std::vector<std::size_t> grad_offsets_;
  std::vector<std::size_t> state_offsets_;
  DeviceSplit train_;
  DeviceSplit test_;
  DeviceArray<std::int64_t> order_;  // the epoch's training order (row indices into train_)
  int batch_ = 0;
  const float* batch_input_ = nullptr;  // the last forward's rows: input_, or test_ in place
  const std::int32_t* batch_labels_ = nullptr;
  DeviceArray<float> input_;  // gathered training rows
  DeviceArray<std::int32_t> labels_;
  std::vector<DeviceArray<float>> acts_;  // acts_[l + 1]: layer l's output; acts_[0] unused
  DeviceArray<float> probs_;
  DeviceArray<float> delta_;
  DeviceArray<float> delta_prev_;
  DeviceArray<float> ones_;
  DeviceArray<double> row_loss_;
  DeviceArray<std::int32_t> row_correct_;
  DeviceArray<double> results_;  // loss sum, correct answers: since the last take_results()
  DeviceArray<unsigned char> scratch_;
};

}  // namespace

std::unique_ptr<Engine> make_cuda_engine(int device_index, Mlp& model, Optimizer& optimizer,
                                         const OptimizerOptions& options) {
  return std::make_unique<CudaEngine>(device_index, model, optimizer, options);
}

}  // namespace ddp::train
