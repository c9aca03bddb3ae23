// Build without CUDA: there are never GPUs to use.
#include "ddp/devices.hpp"

namespace ddp {

bool built_with_cuda() { return false; }
int visible_cuda_devices() { return 0; }

}  // namespace ddp
