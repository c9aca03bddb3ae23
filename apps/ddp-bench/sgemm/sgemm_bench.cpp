// ddp-bench-sgemm: the GEMMs of one ddp-train step (forward, weight gradient, input gradient of
// every layer, FP32 without TF32, as apps/ddp-train/cuda_engine.cpp issues them) timed alone on one
// GPU per batch size. Prints GFLOP/s and the samples/s a step made of nothing but these GEMMs would
// reach: the roofline for ddp-train's CUDA samples/s.
#include <CLI/CLI.hpp>
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "apps/ddp-train/cuda_blas.hpp"

namespace {

struct Options {
  std::vector<int> batch_sizes = {64, 128, 256, 512, 1024, 2048, 4096, 8192};
  std::vector<int> widths = {784, 1024, 1024, 10};
  int device = 0;
  double seconds = 0.5;  // timed seconds per batch size (at least 3 steps)
  bool json = false;
};

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw std::runtime_error(fmt::format("{}: {}", what, cudaGetErrorString(status)));
  }
}

struct DeviceBuffer {
  explicit DeviceBuffer(std::size_t floats) {
    check(cudaMalloc(&data, floats * sizeof(float)), "cudaMalloc");
    check(cudaMemset(data, 0, floats * sizeof(float)), "cudaMemset");
  }
  ~DeviceBuffer() { cudaFree(data); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  float* data = nullptr;
};

// One step's GEMMs at `batch` on buffers large enough for every layer; returns its FLOPs.
class Step {
 public:
  Step(const std::vector<int>& widths, int batch) : widths_(widths), batch_(batch) {
    int widest = 0;
    std::size_t weights = 0;
    for (std::size_t l = 0; l + 1 < widths.size(); ++l) {
      widest = std::max({widest, widths[l], widths[l + 1]});
      weights = std::max(weights, static_cast<std::size_t>(widths[l]) * widths[l + 1]);
    }
    const std::size_t act = static_cast<std::size_t>(widest) * batch;
    a_ = std::make_unique<DeviceBuffer>(act);
    b_ = std::make_unique<DeviceBuffer>(act);
    w_ = std::make_unique<DeviceBuffer>(weights);
    g_ = std::make_unique<DeviceBuffer>(weights);
    const auto& blas = ddp::train::cuda::blas();
    blas_check(blas.create(&handle_), "cublasCreate");
    blas_check(blas.set_math_mode(handle_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  }
  ~Step() { ddp::train::cuda::blas().destroy(handle_); }

  double run() {
    const auto& blas = ddp::train::cuda::blas();
    const float one = 1.0f;
    const float zero = 0.0f;
    double flops = 0;
    const std::size_t layers = widths_.size() - 1;
    for (std::size_t l = 0; l < layers; ++l) {  // forward
      const int n_in = widths_[l];
      const int n_out = widths_[l + 1];
      blas_check(blas.sgemm(handle_, CUBLAS_OP_T, CUBLAS_OP_N, n_out, batch_, n_in, &one, w_->data,
                            n_in, a_->data, n_in, &zero, b_->data, n_out),
                 "sgemm (forward)");
      flops += 2.0 * n_out * batch_ * n_in;
    }
    for (std::size_t l = layers; l-- > 0;) {  // backward
      const int n_in = widths_[l];
      const int n_out = widths_[l + 1];
      blas_check(blas.sgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_T, n_in, n_out, batch_, &one, a_->data,
                            n_in, b_->data, n_out, &one, g_->data, n_in),
                 "sgemm (weight gradient)");
      flops += 2.0 * n_in * n_out * batch_;
      if (l == 0) break;
      blas_check(blas.sgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, n_in, batch_, n_out, &one, w_->data,
                            n_in, b_->data, n_out, &zero, a_->data, n_in),
                 "sgemm (input gradient)");
      flops += 2.0 * n_in * batch_ * n_out;
    }
    return flops;
  }

 private:
  static void blas_check(cublasStatus_t s, const char* what) {
    if (s != CUBLAS_STATUS_SUCCESS) {
      throw std::runtime_error(
          fmt::format("{}: {}", what, ddp::train::cuda::blas().status_string(s)));
    }
  }
  std::vector<int> widths_;
  int batch_;
  cublasHandle_t handle_ = nullptr;
  std::unique_ptr<DeviceBuffer> a_, b_, w_, g_;
};

void measure(const Options& o, int batch) {
  using Clock = std::chrono::steady_clock;
  Step step(o.widths, batch);
  for (int i = 0; i < 3; ++i) step.run();  // warm-up: cuBLAS picks and loads its kernels
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  int steps = 0;
  double flops = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  while (steps < 3 || elapsed < o.seconds) {
    for (int i = 0; i < 10; ++i, ++steps) flops += step.run();
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  }
  const double step_s = elapsed / steps;
  const double gflops = flops / elapsed / 1e9;
  const double samples_per_s = batch / step_s;
  if (o.json) {
    nlohmann::json line{{"version", 1},         {"benchmark", "sgemm"},
                        {"widths", o.widths},    {"batch_size", batch},
                        {"steps", steps},        {"step_us", step_s * 1e6},
                        {"gflops", gflops},      {"gemm_only_samples_per_s", samples_per_s}};
    std::printf("%s\n", line.dump().c_str());
  } else {
    std::printf("batch=%-5d steps=%-6d step=%9.1fus sgemm=%8.1f GFLOP/s gemm_only_samples_per_s=%.0f\n",
                batch, steps, step_s * 1e6, gflops, samples_per_s);
  }
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"cuBLAS sgemm GFLOP/s on ddp-train's GEMM shapes (one GPU, FP32, no TF32)"};
  app.add_option("--batch_sizes", o.batch_sizes, "batch sizes")->delimiter(',')->capture_default_str();
  app.add_option("--widths", o.widths, "layer widths, input first (ddp-train's model)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--device", o.device, "CUDA device")->capture_default_str();
  app.add_option("--seconds", o.seconds, "timed seconds per batch size")->capture_default_str();
  app.add_flag("--json", o.json, "one JSON object per batch size");
  CLI11_PARSE(app, argc, argv);
  try {
    if (o.widths.size() < 2) throw std::runtime_error("--widths: at least two widths");
    for (int w : o.widths) {
      if (w <= 0) throw std::runtime_error(fmt::format("--widths: width {} must be positive", w));
    }
    for (int b : o.batch_sizes) {
      if (b <= 0) throw std::runtime_error(fmt::format("--batch_sizes: {} must be positive", b));
    }
    check(cudaSetDevice(o.device), "cudaSetDevice");
    for (int b : o.batch_sizes) measure(o, b);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp-bench sgemm: %s\n", e.what());
    return 1;
  }
  return 0;
}
