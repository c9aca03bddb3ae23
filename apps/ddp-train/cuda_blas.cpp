// dlopen/dlsym of cuBLAS, once per process.

#include "apps/ddp-train/cuda_blas.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <string>

#include "ddp/error.hpp"

namespace ddp::train::cuda {
namespace {

void* open_library() {
  const std::string name = fmt::format("libcublas.so.{}", CUBLAS_VER_MAJOR);
  void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle != nullptr) return handle;
  const std::string first_error = dlerror();
  const std::string beside = std::string(DDP_CUBLAS_DIR) + "/" + name;
  handle = dlopen(beside.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    throw ConfigError(
        fmt::format("--device cuda: cannot load cuBLAS ({}; {})", first_error, dlerror()));
  }
  return handle;
}

template <class F>
void resolve(void* handle, const char* symbol, F& out) {
  out = reinterpret_cast<F>(dlsym(handle, symbol));
  if (out == nullptr) {
    throw ConfigError(fmt::format("--device cuda: cuBLAS has no {}", symbol));
  }
}

Blas load() {
  void* handle = open_library();  // kept open for the life of the process
  Blas b{};
  resolve(handle, "cublasCreate_v2", b.create);
  resolve(handle, "cublasDestroy_v2", b.destroy);
  resolve(handle, "cublasSetStream_v2", b.set_stream);
  resolve(handle, "cublasSetMathMode", b.set_math_mode);
  resolve(handle, "cublasSgemm_v2", b.sgemm);
  resolve(handle, "cublasSgemv_v2", b.sgemv);
  resolve(handle, "cublasGetStatusString", b.status_string);
  return b;
}

}  // namespace

const Blas& blas() {
  static const Blas loaded = load();
  return loaded;
}

}  // namespace ddp::train::cuda
