#pragma once
// Byte fixtures for the store server and client tests: hex text to bytes, and little-endian
// framing helpers to build requests the way PyTorch's clients do (spec/torchrun.md §5).

#include <cctype>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace ddp::rdzv::test {

using ByteVec = std::vector<std::uint8_t>;

// "00 | 0300000000000000 2f6b31" -> bytes (anything but hex digits is ignored).
inline ByteVec hex(const std::string& text) {
  ByteVec out;
  std::string digits;
  for (char c : text) {
    if (std::isxdigit(static_cast<unsigned char>(c))) digits += c;
  }
  for (std::size_t i = 0; i + 1 < digits.size(); i += 2) {
    out.push_back(static_cast<std::uint8_t>(std::stoi(digits.substr(i, 2), nullptr, 16)));
  }
  return out;
}

inline ByteVec cat(std::initializer_list<ByteVec> parts) {
  ByteVec out;
  for (const auto& part : parts) out.insert(out.end(), part.begin(), part.end());
  return out;
}

inline ByteVec u64le(std::uint64_t value) {
  ByteVec out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
  return out;
}

// A string/value field: u64 length + bytes.
inline ByteVec str(const std::string& text) {
  ByteVec out = u64le(text.size());
  out.insert(out.end(), text.begin(), text.end());
  return out;
}

inline ByteVec byte(std::uint8_t b) { return ByteVec{b}; }

// The 2.x handshake: VALIDATE with the magic.
inline ByteVec validate() { return hex("00 CE F7 85 3C"); }

}  // namespace ddp::rdzv::test
