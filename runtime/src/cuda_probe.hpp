#pragma once
// Asks the CUDA runtime how many GPUs this process sees. cuda_probe.cpp (CUDA builds) or
// cuda_probe_none.cpp (builds without CUDA) implements it.

namespace ddp::runtime {

bool built_with_cuda();

// GPUs visible to this process; 0 when the runtime reports any error (no driver, a driver too
// old for the runtime, CUDA_VISIBLE_DEVICES empty).
int visible_cuda_devices();

}  // namespace ddp::runtime
