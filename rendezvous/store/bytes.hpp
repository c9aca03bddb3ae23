#pragma once
// Bytes: a store value as the wire carries it, and the conversions from and to text. Apart from
// store.hpp so that code without an Asio loop (BlockingStore's callers) names values without
// including Asio.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ddp::rdzv {

using Bytes = std::vector<std::uint8_t>;

inline Bytes to_bytes(std::string_view s) { return Bytes(s.begin(), s.end()); }
inline std::string to_string(const Bytes& b) { return std::string(b.begin(), b.end()); }

}  // namespace ddp::rdzv
