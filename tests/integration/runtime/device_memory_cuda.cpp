// Device memory over the CUDA runtime. Copies are synchronous on the legacy default stream, which
// the NCCL process group waits for before each operation.
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <stdexcept>

#include "device_memory.hpp"

namespace ddp::test {
namespace {

void check(cudaError_t status, const char* what, int device) {
  if (status != cudaSuccess) {
    throw std::runtime_error(
        fmt::format("{} on CUDA device {}: {}", what, device, cudaGetErrorString(status)));
  }
}

}  // namespace

void* device_alloc(std::size_t bytes, int device) {
  check(cudaSetDevice(device), "cudaSetDevice", device);
  void* p = nullptr;
  check(cudaMalloc(&p, bytes == 0 ? 1 : bytes), "cudaMalloc", device);
  return p;
}

void device_free(void* p, int device) {
  cudaSetDevice(device);
  cudaFree(p);
}

void copy_to_device(void* dst, const void* src, std::size_t bytes, int device) {
  check(cudaSetDevice(device), "cudaSetDevice", device);
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device", device);
}

void copy_to_host(void* dst, const void* src, std::size_t bytes, int device) {
  check(cudaSetDevice(device), "cudaSetDevice", device);
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host", device);
}

}  // namespace ddp::test
