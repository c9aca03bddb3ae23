#pragma once
// Benchmark sizes: "4K..256M" (every power of `factor` from 4 KiB to 256 MiB), or a comma list
// "4K,1M,1000". Suffixes K, M, G are powers of 1024; a plain number is bytes.

#include <cstddef>
#include <string>
#include <vector>

namespace ddp::bench {

// Throws ConfigError naming --sizes for malformed text.
std::vector<std::size_t> parse_sizes(const std::string& text, std::size_t factor);

// "4KiB", "256MiB", "1000B".
std::string format_size(std::size_t bytes);

}  // namespace ddp::bench
