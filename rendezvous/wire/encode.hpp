#pragma once
// Appending TCPStore wire fields to a byte buffer: little-endian integers and length-prefixed
// strings, as the server's replies and the client's requests carry them. Sans-IO, header-only.

#include "rendezvous/wire/protocol.hpp"

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace ddp::rdzv::wire {

using Buffer = std::vector<std::uint8_t>;

inline void append_le(Buffer& out, std::uint64_t value, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
}

inline void append_u8(Buffer& out, std::uint8_t value) { out.push_back(value); }
inline void append_u32(Buffer& out, std::uint32_t value) { append_le(out, value, 4); }
inline void append_u64(Buffer& out, std::uint64_t value) { append_le(out, value, 8); }
inline void append_i64(Buffer& out, std::int64_t value) {
  append_le(out, static_cast<std::uint64_t>(value), 8);
}

// A string or value: u64 length, then the bytes.
inline void append_bytes(Buffer& out, std::span<const std::uint8_t> bytes) {
  append_u64(out, bytes.size());
  out.insert(out.end(), bytes.begin(), bytes.end());
}
inline void append_bytes(Buffer& out, std::string_view text) {
  append_bytes(out, std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
}

}  // namespace ddp::rdzv::wire
