// Backend choice. A CUDA build on a machine without a usable driver (cudaGetDeviceCount fails with
// cudaErrorInsufficientDriver there, rather than returning 0) falls back to gloo: see
// cuda_devices.cpp.
#include "runtime/src/backend_choice.hpp"

#include <fmt/format.h>

#include <cstdlib>

#include "ddp/devices.hpp"
#include "ddp/error.hpp"

namespace ddp::runtime {

std::string choose_backend(const std::string& requested) {
  std::string origin = "InitOptions::backend";
  std::string name = requested;
  if (name.empty()) {
    const char* env = std::getenv("DDP_BACKEND");
    if (env != nullptr && *env != '\0') {
      name = env;
      origin = "environment variable DDP_BACKEND";
    }
  }
  if (name.empty()) return visible_cuda_devices() > 0 ? "nccl" : "gloo";
  if (name != "gloo" && name != "nccl") {
    throw ConfigError(fmt::format("{}='{}' is not a backend (gloo, nccl)", origin, name));
  }
  if (name == "nccl" && !built_with_cuda()) {
    throw ConfigError(fmt::format(
        "{}=nccl, but this libddp was built without CUDA/NCCL (use gloo)", origin));
  }
  return name;
}

}  // namespace ddp::runtime
