// A build without CUDA: there is no CUDA engine to make.

#include "apps/ddp-train/engine.hpp"
#include "ddp/error.hpp"

namespace ddp::train {

std::unique_ptr<Engine> make_cuda_engine(int /*device_index*/, Mlp& /*model*/,
                                         Optimizer& /*optimizer*/,
                                         const OptimizerOptions& /*options*/) {
  throw ConfigError("--device cuda: this ddp-train was built without CUDA");
}

}  // namespace ddp::train
