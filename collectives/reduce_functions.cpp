// Reductions: one template per (element type, op), instantiated for every DType. Loops are simple
// enough for GCC to vectorise at -O3; the 16-bit types convert element by element.
#include "collectives/reduce_functions.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "common/check.hpp"

namespace ddp::coll {

float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exponent = (h >> 10) & 0x1fu;
  std::uint32_t mantissa = h & 0x3ffu;
  std::uint32_t bits = 0;
  if (exponent == 0x1f) {  // inf or NaN
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {  // normal
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa != 0) {  // subnormal: normalise
    exponent = 113;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --exponent;
    }
    bits = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
  } else {
    bits = sign;
  }
  return std::bit_cast<float>(bits);
}

std::uint16_t float_to_half(float f) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t abs = bits & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN (keep a quiet NaN)
    return static_cast<std::uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x38800000u) {  // result is subnormal or zero: add the implicit bit, shift, round
    if (abs < 0x33000000u) return sign;  // below half the smallest subnormal
    const std::uint32_t exponent = abs >> 23;
    const std::uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126 - exponent;  // 14..24
    std::uint32_t value = mantissa >> shift;
    const std::uint32_t rest = mantissa & ((1u << shift) - 1);
    const std::uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (value & 1u))) ++value;
    return static_cast<std::uint16_t>(sign | value);
  }
  // Normal: rebias the exponent, round the 13 dropped mantissa bits to nearest even.
  std::uint32_t value = ((abs - 0x38000000u) >> 13);
  const std::uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (value & 1u))) ++value;
  return static_cast<std::uint16_t>(sign | value);
}

float bfloat16_to_float(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

std::uint16_t float_to_bfloat16(float f) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  const std::uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

namespace {

struct Sum {
  template <class T> static T apply(T a, T b) { return static_cast<T>(a + b); }
};
struct Product {
  template <class T> static T apply(T a, T b) { return static_cast<T>(a * b); }
};
struct Min {
  template <class T> static T apply(T a, T b) { return std::min(a, b); }
};
struct Max {
  template <class T> static T apply(T a, T b) { return std::max(a, b); }
};

template <class T, class Op>
void reduce_native(void* out, const void* a, const void* b, std::size_t n) {
  auto* o = static_cast<T*>(out);
  const auto* x = static_cast<const T*>(a);
  const auto* y = static_cast<const T*>(b);
  for (std::size_t i = 0; i < n; ++i) o[i] = Op::apply(x[i], y[i]);
}

// 16-bit floats: widen, reduce in float, narrow.
template <float (*Widen)(std::uint16_t), std::uint16_t (*Narrow)(float), class Op>
void reduce_16bit(void* out, const void* a, const void* b, std::size_t n) {
  auto* o = static_cast<std::uint16_t*>(out);
  const auto* x = static_cast<const std::uint16_t*>(a);
  const auto* y = static_cast<const std::uint16_t*>(b);
  for (std::size_t i = 0; i < n; ++i) o[i] = Narrow(Op::apply(Widen(x[i]), Widen(y[i])));
}

template <class Op>
ReduceFn for_dtype(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return &reduce_native<float, Op>;
    case DType::kFloat64: return &reduce_native<double, Op>;
    case DType::kInt32: return &reduce_native<std::int32_t, Op>;
    case DType::kInt64: return &reduce_native<std::int64_t, Op>;
    case DType::kUInt8: return &reduce_native<std::uint8_t, Op>;
    case DType::kFloat16: return &reduce_16bit<half_to_float, float_to_half, Op>;
    case DType::kBFloat16: return &reduce_16bit<bfloat16_to_float, float_to_bfloat16, Op>;
  }
  DDP_CHECK(false, "unknown dtype {}", static_cast<int>(dtype));
  return nullptr;
}

template <class T>
void divide_native(void* data, std::size_t n, int by) {
  auto* p = static_cast<T*>(data);
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<T>(p[i] / static_cast<T>(by));
}

template <float (*Widen)(std::uint16_t), std::uint16_t (*Narrow)(float)>
void divide_16bit(void* data, std::size_t n, int by) {
  auto* p = static_cast<std::uint16_t*>(data);
  for (std::size_t i = 0; i < n; ++i) p[i] = Narrow(Widen(p[i]) / static_cast<float>(by));
}

}  // namespace

ReduceFn reduce_function(DType dtype, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return for_dtype<Sum>(dtype);
    case ReduceOp::kProduct: return for_dtype<Product>(dtype);
    case ReduceOp::kMin: return for_dtype<Min>(dtype);
    case ReduceOp::kMax: return for_dtype<Max>(dtype);
  }
  DDP_CHECK(false, "unknown reduce op {}", static_cast<int>(op));
  return nullptr;
}

void divide_by_count(const Tensor& t, int n) {
  switch (t.dtype) {
    case DType::kFloat32: return divide_native<float>(t.data, t.count, n);
    case DType::kFloat64: return divide_native<double>(t.data, t.count, n);
    case DType::kInt32: return divide_native<std::int32_t>(t.data, t.count, n);
    case DType::kInt64: return divide_native<std::int64_t>(t.data, t.count, n);
    case DType::kUInt8: return divide_native<std::uint8_t>(t.data, t.count, n);
    case DType::kFloat16: return divide_16bit<half_to_float, float_to_half>(t.data, t.count, n);
    case DType::kBFloat16:
      return divide_16bit<bfloat16_to_float, float_to_bfloat16>(t.data, t.count, n);
  }
}

}  // namespace ddp::coll
