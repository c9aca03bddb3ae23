// CUDA builds: cuBLAS loads at run time (dlopen) with every function the CUDA engine calls; no GPU
// is needed for that, so CI checks it.

#include <catch2/catch.hpp>

#include <string>

#include "apps/ddp-train/cuda_blas.hpp"

TEST_CASE("cuBLAS loads on first use with every function the engine calls", "[cuda]") {
  const ddp::train::cuda::Blas& b = ddp::train::cuda::blas();
  CHECK(b.create != nullptr);
  CHECK(b.destroy != nullptr);
  CHECK(b.set_stream != nullptr);
  CHECK(b.set_math_mode != nullptr);
  CHECK(b.sgemm != nullptr);
  CHECK(b.sgemv != nullptr);
  REQUIRE(b.status_string != nullptr);
  CHECK(std::string(b.status_string(CUBLAS_STATUS_SUCCESS)) == "success");
  CHECK(&ddp::train::cuda::blas() == &b);  // loaded once
}
