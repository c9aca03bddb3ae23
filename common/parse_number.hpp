#pragma once
// parse_number<T>: the one way ddprun reads an integer or a double from text it was given (flags,
// environment variables, store values, files). Callers build their own error messages.

#include <charconv>
#include <optional>
#include <string_view>

namespace ddp {

// The number `text` spells in full, or nullopt: empty text, junk, a sign an unsigned T cannot
// hold, any leading or trailing character (whitespace and '+' included), or overflow. Decimal,
// locale-independent (std::from_chars); doubles also take exponents, "inf" and "nan".
template <typename T>
std::optional<T> parse_number(std::string_view text) {
  T value{};
  const char* const last = text.data() + text.size();
  const auto [end, ec] = std::from_chars(text.data(), last, value);
  if (text.empty() || ec != std::errc() || end != last) return std::nullopt;
  return value;
}

}  // namespace ddp
