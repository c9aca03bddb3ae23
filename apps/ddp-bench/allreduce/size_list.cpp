// Size lists for the benchmarks.
#include "size_list.hpp"

#include <fmt/format.h>

#include <charconv>

#include "ddp/error.hpp"

namespace ddp::bench {
namespace {

std::size_t parse_one(const std::string& text) {
  std::size_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  std::size_t scale = 1;
  if (ptr != end && ptr + 1 == end) {
    switch (*ptr) {
      case 'K': case 'k': scale = std::size_t{1} << 10; break;
      case 'M': case 'm': scale = std::size_t{1} << 20; break;
      case 'G': case 'g': scale = std::size_t{1} << 30; break;
      default: scale = 0;
    }
    ++ptr;
  }
  if (ec != std::errc{} || ptr != end || scale == 0 || value == 0) {
    throw ConfigError(fmt::format("--sizes: '{}' is not a size (like 4K, 256M or 1000)", text));
  }
  return value * scale;
}

}  // namespace

std::vector<std::size_t> parse_sizes(const std::string& text, std::size_t factor) {
  std::vector<std::size_t> sizes;
  if (auto dots = text.find(".."); dots != std::string::npos) {
    if (factor < 2) throw ConfigError("--factor must be at least 2");
    const std::size_t first = parse_one(text.substr(0, dots));
    const std::size_t last = parse_one(text.substr(dots + 2));
    for (std::size_t s = first; s <= last; s *= factor) sizes.push_back(s);
    return sizes;
  }
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto comma = text.find(',', start);
    sizes.push_back(parse_one(text.substr(start, comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return sizes;
}

std::string format_size(std::size_t bytes) {
  if (bytes % (std::size_t{1} << 30) == 0) return fmt::format("{}GiB", bytes >> 30);
  if (bytes % (std::size_t{1} << 20) == 0) return fmt::format("{}MiB", bytes >> 20);
  if (bytes % (std::size_t{1} << 10) == 0) return fmt::format("{}KiB", bytes >> 10);
  return fmt::format("{}B", bytes);
}

}  // namespace ddp::bench
