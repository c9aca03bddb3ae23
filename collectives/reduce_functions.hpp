#pragma once
// Element-wise reductions for every DType and ReduceOp, in the shape Gloo's AllreduceOptions takes
// (out = a op b over n elements; out may alias a or b). 16-bit floats (float16, bfloat16) are
// widened to float, reduced and rounded back to nearest-even, as PyTorch does on the CPU.

#include <cstddef>
#include <cstdint>

#include "ddp/process_group.hpp"

namespace ddp::coll {

using ReduceFn = void (*)(void* out, const void* a, const void* b, std::size_t n);

// The reduction for `op` over `dtype`. kAvg reduces as kSum; callers divide afterwards
// (divide_by_count).
ReduceFn reduce_function(DType dtype, ReduceOp op);

// t[i] /= n for every element (integers: truncating division, as C++ does).
void divide_by_count(const Tensor& t, int n);

// IEEE binary16 and bfloat16 conversions (round to nearest even; NaN stays NaN).
float half_to_float(std::uint16_t h);
std::uint16_t float_to_half(float f);
float bfloat16_to_float(std::uint16_t b);
std::uint16_t float_to_bfloat16(float f);

}  // namespace ddp::coll
