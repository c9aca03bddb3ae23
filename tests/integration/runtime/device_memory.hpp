#pragma once
// Device memory for the runtime worker's GPU scenarios (ops-cuda): allocation and copies on a
// CUDA device. In a build without CUDA they throw (ddp::runtime::visible_cuda_devices() is 0).

#include <cstddef>

namespace ddp::test {

void* device_alloc(std::size_t bytes, int device);
void device_free(void* p, int device);
void copy_to_device(void* dst, const void* src, std::size_t bytes, int device);
void copy_to_host(void* dst, const void* src, std::size_t bytes, int device);

}  // namespace ddp::test
