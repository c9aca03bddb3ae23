#pragma once
// HMAC-SHA256 and the random bytes of a challenge, through OpenSSL's libcrypto. Thread-safe,
// no state of their own.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace ddp::rdzv::auth {

inline constexpr std::size_t kTagBytes = 32;  // SHA-256's output
using Tag = std::array<std::uint8_t, kTagBytes>;

// HMAC-SHA256(key, message) (RFC 2104). Throws InternalError if libcrypto fails.
Tag hmac_sha256(std::string_view key, std::string_view message);

// `n` bytes from the operating system's generator (RAND_bytes). Throws InternalError if it fails.
std::vector<std::uint8_t> random_bytes(std::size_t n);

// True when a and b are equal, in a time that does not depend on where they differ.
bool equal_in_constant_time(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b);

}  // namespace ddp::rdzv::auth
