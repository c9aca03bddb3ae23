// Reductions and 16-bit conversions, against values computed by hand.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "collectives/reduce_functions.hpp"

using namespace ddp;
using namespace ddp::coll;

TEST_CASE("float16 conversion is exact for representable values and rounds to nearest even",
          "[reduce]") {
  CHECK(float_to_half(1.0f) == 0x3c00);
  CHECK(float_to_half(-2.0f) == 0xc000);
  CHECK(float_to_half(65504.0f) == 0x7bff);
  CHECK(float_to_half(1e6f) == 0x7c00);  // overflow to inf
  CHECK(float_to_half(0.0f) == 0x0000);
  CHECK(float_to_half(5.960464477539063e-8f) == 0x0001);  // smallest subnormal
  CHECK(half_to_float(0x0001) == 5.960464477539063e-8f);
  CHECK(half_to_float(0x3555) == Approx(0.333251953125f));
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties go to the even mantissa (1.0).
  CHECK(float_to_half(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);
  CHECK(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);
  CHECK(std::isnan(half_to_float(float_to_half(std::numeric_limits<float>::quiet_NaN()))));
  for (std::uint32_t h = 0; h < 0x7c00; ++h) {  // every finite positive half round-trips
    REQUIRE(float_to_half(half_to_float(static_cast<std::uint16_t>(h))) == h);
  }
}

TEST_CASE("bfloat16 conversion keeps the top 16 bits, rounding to nearest even", "[reduce]") {
  CHECK(float_to_bfloat16(1.0f) == 0x3f80);
  CHECK(bfloat16_to_float(0x3f80) == 1.0f);
  CHECK(float_to_bfloat16(-3.0f) == 0xc040);
  CHECK(float_to_bfloat16(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);      // tie -> even
  CHECK(float_to_bfloat16(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3f82);  // tie -> even (up)
  CHECK(std::isnan(bfloat16_to_float(float_to_bfloat16(std::nanf("")))));
}

TEST_CASE("every op reduces every dtype element-wise", "[reduce]") {
  SECTION("float32") {
    std::vector<float> a{1, -2, 3.5f}, b{4, 5, -1};
    std::vector<float> out(3);
    reduce_function(DType::kFloat32, ReduceOp::kSum)(out.data(), a.data(), b.data(), 3);
    CHECK(out == std::vector<float>{5, 3, 2.5f});
    reduce_function(DType::kFloat32, ReduceOp::kProduct)(out.data(), a.data(), b.data(), 3);
    CHECK(out == std::vector<float>{4, -10, -3.5f});
    reduce_function(DType::kFloat32, ReduceOp::kMin)(out.data(), a.data(), b.data(), 3);
    CHECK(out == std::vector<float>{1, -2, -1});
    reduce_function(DType::kFloat32, ReduceOp::kMax)(out.data(), a.data(), b.data(), 3);
    CHECK(out == std::vector<float>{4, 5, 3.5f});
  }
  SECTION("int64 and uint8 wrap as their C++ types do") {
    std::vector<std::int64_t> a{std::int64_t{1} << 40, -7}, b{3, 2};
    reduce_function(DType::kInt64, ReduceOp::kSum)(a.data(), a.data(), b.data(), 2);
    CHECK(a == std::vector<std::int64_t>{(std::int64_t{1} << 40) + 3, -5});
    std::vector<std::uint8_t> x{200, 3}, y{100, 7};
    reduce_function(DType::kUInt8, ReduceOp::kSum)(x.data(), x.data(), y.data(), 2);
    CHECK(x == std::vector<std::uint8_t>{44, 10});
  }
  SECTION("float16 and bfloat16 reduce through float") {
    std::vector<std::uint16_t> a{float_to_half(1.5f), float_to_half(-4.0f)};
    std::vector<std::uint16_t> b{float_to_half(2.25f), float_to_half(3.0f)};
    reduce_function(DType::kFloat16, ReduceOp::kSum)(a.data(), a.data(), b.data(), 2);
    CHECK(half_to_float(a[0]) == 3.75f);
    CHECK(half_to_float(a[1]) == -1.0f);
    std::vector<std::uint16_t> c{float_to_bfloat16(2.0f)}, d{float_to_bfloat16(-8.0f)};
    reduce_function(DType::kBFloat16, ReduceOp::kMin)(c.data(), c.data(), d.data(), 1);
    CHECK(bfloat16_to_float(c[0]) == -8.0f);
  }
}

TEST_CASE("divide_by_count divides floats exactly and truncates integers", "[reduce]") {
  std::vector<double> d{3.0, -1.0};
  divide_by_count(Tensor{d.data(), 2, DType::kFloat64}, 4);
  CHECK(d == std::vector<double>{0.75, -0.25});
  std::vector<std::int32_t> i{7, -7};
  divide_by_count(Tensor{i.data(), 2, DType::kInt32}, 2);
  CHECK(i == std::vector<std::int32_t>{3, -3});
  std::vector<std::uint16_t> h{float_to_half(3.0f)};
  divide_by_count(Tensor{h.data(), 1, DType::kFloat16}, 2);
  CHECK(half_to_float(h[0]) == 1.5f);
}
