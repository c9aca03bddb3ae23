#pragma once
// Which collective backend ddp::init uses: the explicit choice (InitOptions::backend, then
// $DDP_BACKEND), else nccl when libddp was built with CUDA and a GPU is visible, else gloo.

#include <string>

namespace ddp::runtime {

// `requested` is InitOptions::backend ("" for none). Returns "gloo" or "nccl"; throws ConfigError
// naming DDP_BACKEND (or the option) for an unknown name, or nccl in a build without CUDA.
std::string choose_backend(const std::string& requested);

}  // namespace ddp::runtime
