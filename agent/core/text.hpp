#pragma once
// Text helpers shared by the agent's parsing units: whitespace stripping and comma splitting.

#include <cctype>
#include <string_view>
#include <vector>

namespace ddp::agent::detail {

inline std::string_view strip(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  return text;
}

// Splits at every ',' ("a,,b" gives "a", "", "b"; "" gives one empty item).
inline std::vector<std::string_view> split_commas(std::string_view text) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    parts.push_back(text.substr(start, comma - start));
    if (comma == std::string_view::npos) return parts;
    start = comma + 1;
  }
}

}  // namespace ddp::agent::detail
