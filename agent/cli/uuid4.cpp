// make_uuid4: 16 bytes from a generator seeded by std::random_device, then the version and variant
// bits set as RFC 4122 section 4.4 asks.

#include "agent/cli/uuid4.hpp"

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <random>

namespace ddp::agent {

std::string make_uuid4() {
  std::random_device device;
  std::mt19937_64 generator((static_cast<std::uint64_t>(device()) << 32) ^ device());
  std::array<std::uint8_t, 16> bytes{};
  for (auto& byte : bytes) byte = static_cast<std::uint8_t>(generator());
  bytes[6] = static_cast<std::uint8_t>((bytes[6] & 0x0f) | 0x40);  // version 4
  bytes[8] = static_cast<std::uint8_t>((bytes[8] & 0x3f) | 0x80);  // RFC 4122 variant
  std::string text;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
    text += fmt::format("{:02x}", bytes[i]);
  }
  return text;
}

}  // namespace ddp::agent
