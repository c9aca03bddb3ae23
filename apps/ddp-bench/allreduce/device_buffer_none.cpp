// DeviceBuffer in a build without CUDA: constructing one says so.

#include "ddp/error.hpp"
#include "device_buffer.hpp"

namespace ddp::bench {

DeviceBuffer::DeviceBuffer(std::size_t, int) {
  throw ConfigError("--mode nccl: this ddp-bench was built without CUDA");
}
DeviceBuffer::~DeviceBuffer() = default;
void DeviceBuffer::upload(const float*, std::size_t) {}
void DeviceBuffer::download(float*, std::size_t) const {}

}  // namespace ddp::bench
