// CUDA build: the runtime API answers. Errors mean "no GPU" (cudaErrorInsufficientDriver on a
// machine without a driver, cudaErrorNoDevice without a device).
#include "ddp/devices.hpp"

#include <cuda_runtime_api.h>

namespace ddp {

bool built_with_cuda() { return true; }

int visible_cuda_devices() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error for later callers
    return 0;
  }
  return count;
}

}  // namespace ddp
