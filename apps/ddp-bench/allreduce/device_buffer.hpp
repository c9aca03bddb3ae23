#pragma once
// A float buffer in one CUDA device's memory for --mode nccl; in a build without CUDA every call
// throws ConfigError saying so.

#include <cstddef>

namespace ddp::bench {

class DeviceBuffer {
 public:
  DeviceBuffer(std::size_t count, int device);  // cudaMalloc of count floats on `device`
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  float* data() const { return data_; }
  std::size_t count() const { return count_; }
  int device() const { return device_; }
  void upload(const float* host, std::size_t count);      // the first `count` floats
  void download(float* host, std::size_t count) const;    // likewise

 private:
  float* data_ = nullptr;
  std::size_t count_ = 0;
  int device_ = 0;
};

}  // namespace ddp::bench
