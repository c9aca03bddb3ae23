#pragma once
// cuBLAS for the CUDA engine, loaded on first use (dlopen) instead of linked: libcublasLt alone is
// over 500 MB, and linking it cost every ddp-train process 0.4 s and 220 MB of memory at start,
// on the CPU path too. Only the functions the engine calls are resolved.

#include <cublas_v2.h>

namespace ddp::train::cuda {

struct Blas {
  decltype(&::cublasCreate_v2) create;
  decltype(&::cublasDestroy_v2) destroy;
  decltype(&::cublasSetStream_v2) set_stream;
  decltype(&::cublasSetMathMode) set_math_mode;
  decltype(&::cublasSgemm_v2) sgemm;
  decltype(&::cublasSgemv_v2) sgemv;
  decltype(&::cublasGetStatusString) status_string;
};

// Loads libcublas.so.<major> once (the loader's search path, then the toolkit's library directory
// this build found). Throws ConfigError naming the library or the missing symbol.
const Blas& blas();

}  // namespace ddp::train::cuda
