// Build without CUDA: there are never GPUs to use.
#include "runtime/src/cuda_probe.hpp"

namespace ddp::runtime {

bool built_with_cuda() { return false; }
int visible_cuda_devices() { return 0; }

}  // namespace ddp::runtime
