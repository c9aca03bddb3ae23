#pragma once
// Which compute devices this process can use: whether libddp was built with CUDA, and how many
// GPUs the CUDA runtime shows this process.

namespace ddp {

// True when this libddp was built with CUDA and NCCL (the "nccl" backend exists).
bool built_with_cuda();

// GPUs visible to this process; 0 when the runtime reports any error (no driver, a driver too
// old for the runtime, CUDA_VISIBLE_DEVICES empty) and in builds without CUDA.
int visible_cuda_devices();

}  // namespace ddp
