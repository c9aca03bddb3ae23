// Device memory in a build without CUDA: every call but device_free throws.
#include <stdexcept>

#include "device_memory.hpp"

namespace ddp::test {
namespace {

[[noreturn]] void no_cuda() { throw std::runtime_error("this build has no CUDA"); }

}  // namespace

void* device_alloc(std::size_t, int) { no_cuda(); }
void device_free(void*, int) {}
void copy_to_device(void*, const void*, std::size_t, int) { no_cuda(); }
void copy_to_host(void*, const void*, std::size_t, int) { no_cuda(); }

}  // namespace ddp::test
