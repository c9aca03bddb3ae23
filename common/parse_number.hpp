#pragma once
// parse_number<T>: the one way ddprun reads an integer or a double from text it was given (flags,
// environment variables, store values, files). Callers build their own error messages.

#include <charconv>
#include <optional>
#include <string_view>
#include <type_traits>

namespace ddp {

// The number `text` spells in full, or nullopt: empty text, junk, a sign an unsigned T cannot
// hold, any leading or trailing character (whitespace and '+' included), or overflow. Decimal
// unless `base` says otherwise (integers only), locale-independent (std::from_chars); doubles also
// take exponents, "inf" and "nan".
template <typename T>
std::optional<T> parse_number(std::string_view text, int base = 10) {
  T value{};
  const char* const last = text.data() + text.size();
  std::from_chars_result result;
  if constexpr (std::is_integral_v<T>) {
    result = std::from_chars(text.data(), last, value, base);
  } else {
    result = std::from_chars(text.data(), last, value);
  }
  if (text.empty() || result.ec != std::errc() || result.ptr != last) return std::nullopt;
  return value;
}

// The number `text` starts with, whatever follows it ("2(x3)" gives 2), or nullopt when it does
// not start with one. For formats that put a count before other text: SLURM's task counts,
// "key value" lines.
template <typename T>
std::optional<T> parse_leading_number(std::string_view text) {
  T value{};
  const auto result = std::from_chars(text.data(), text.data() + text.size(), value);
  if (result.ec != std::errc() || result.ptr == text.data()) return std::nullopt;
  return value;
}

}  // namespace ddp
