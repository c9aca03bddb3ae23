// common/parse_number.hpp: whole-string integers (any base) and doubles, leading numbers; nullopt
// for anything else.

#include "common/parse_number.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>

using ddp::parse_number;

TEST_CASE("parse_number reads whole decimal integers", "[unit][parse_number]") {
  CHECK(parse_number<int>("0") == 0);
  CHECK(parse_number<int>("42") == 42);
  CHECK(parse_number<int>("-7") == -7);
  CHECK(parse_number<int>("007") == 7);
  CHECK(parse_number<std::int64_t>("-9223372036854775808") == INT64_MIN);
  CHECK(parse_number<unsigned long long>("18446744073709551615") == UINT64_MAX);
}

TEST_CASE("parse_number rejects partial, padded and out-of-range text", "[unit][parse_number]") {
  CHECK_FALSE(parse_number<int>(""));
  CHECK_FALSE(parse_number<int>("abc"));
  CHECK_FALSE(parse_number<int>("12abc"));
  CHECK_FALSE(parse_number<int>("2(x3)"));
  CHECK_FALSE(parse_number<int>(" 5"));
  CHECK_FALSE(parse_number<int>("5 "));
  CHECK_FALSE(parse_number<int>("+5"));
  CHECK_FALSE(parse_number<int>("1.5"));
  CHECK_FALSE(parse_number<int>("0x10"));
  CHECK_FALSE(parse_number<int>("2147483648"));
  CHECK_FALSE(parse_number<unsigned>("-1"));
  CHECK_FALSE(parse_number<std::int64_t>("9223372036854775808"));
}

TEST_CASE("parse_number reads whole doubles", "[unit][parse_number]") {
  CHECK(parse_number<double>("1.5") == 1.5);
  CHECK(parse_number<double>("-0.25") == -0.25);
  CHECK(parse_number<double>("30") == 30.0);
  CHECK(parse_number<double>("1e3") == 1000.0);
  CHECK(std::isinf(*parse_number<double>("inf")));
  CHECK_FALSE(parse_number<double>(""));
  CHECK_FALSE(parse_number<double>("1.5s"));
  CHECK_FALSE(parse_number<double>(" 1.5"));
  CHECK_FALSE(parse_number<double>("."));
  CHECK_FALSE(parse_number<double>("1e999"));
}

TEST_CASE("parse_number reads only the view it is given", "[unit][parse_number]") {
  const std::string_view text = "123456";
  CHECK(parse_number<int>(text.substr(1, 3)) == 234);
}

TEST_CASE("parse_number reads integers in another base", "[unit][parse_number]") {
  CHECK(parse_number<unsigned>("1F90", 16) == 8080u);
  CHECK(parse_number<unsigned>("ff", 16) == 255u);
  CHECK_FALSE(parse_number<unsigned>("0x1F90", 16));
  CHECK_FALSE(parse_number<unsigned>("1G", 16));
}

TEST_CASE("parse_leading_number reads the number a text starts with", "[unit][parse_number]") {
  using ddp::parse_leading_number;
  CHECK(parse_leading_number<int>("2(x3)") == 2);
  CHECK(parse_leading_number<int>("16") == 16);
  CHECK(parse_leading_number<std::uint64_t>("7 kills") == 7u);
  CHECK_FALSE(parse_leading_number<int>(""));
  CHECK_FALSE(parse_leading_number<int>("(x3)"));
  CHECK_FALSE(parse_leading_number<int>(" 2"));
  CHECK_FALSE(parse_leading_number<std::uint64_t>("-1"));
}
