// DeviceBuffer over the CUDA runtime: synchronous copies, so a copy never overlaps a timed
// operation.

#include <cuda_runtime.h>
#include <fmt/format.h>

#include "ddp/error.hpp"
#include "device_buffer.hpp"

namespace ddp::bench {
namespace {

void check(cudaError_t status, const char* what, int device) {
  if (status != cudaSuccess) {
    throw IoError(fmt::format("{} on CUDA device {}: {}", what, device, cudaGetErrorString(status)));
  }
}

}  // namespace

DeviceBuffer::DeviceBuffer(std::size_t count, int device) : count_(count), device_(device) {
  check(cudaSetDevice(device), "cudaSetDevice", device);
  void* p = nullptr;
  check(cudaMalloc(&p, (count == 0 ? 1 : count) * sizeof(float)), "cudaMalloc", device);
  data_ = static_cast<float*>(p);
  check(cudaMemset(data_, 0, count * sizeof(float)), "cudaMemset", device);
}

DeviceBuffer::~DeviceBuffer() {
  cudaSetDevice(device_);
  cudaFree(data_);
}

void DeviceBuffer::upload(const float* host, std::size_t count) {
  check(cudaMemcpy(data_, host, count * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy",
        device_);
}

void DeviceBuffer::download(float* host, std::size_t count) const {
  check(cudaMemcpy(host, data_, count * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy",
        device_);
}

}  // namespace ddp::bench
