#pragma once
// Device memory for the runtime worker's GPU scenarios (ops-cuda): allocation and copies on a
// CUDA device. In a build without CUDA the device count is 0 and the rest throws.

#include <cstddef>

namespace ddp::test {

// Visible CUDA devices; 0 without CUDA, without a GPU, or with a driver too old for the runtime.
int cuda_device_count();

void* device_alloc(std::size_t bytes, int device);
void device_free(void* p, int device);
void copy_to_device(void* dst, const void* src, std::size_t bytes, int device);
void copy_to_host(void* dst, const void* src, std::size_t bytes, int device);

}  // namespace ddp::test
