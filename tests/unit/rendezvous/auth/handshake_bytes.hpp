#pragma once
// Bytes the handshake tests send: a challenge filled with one byte, and a HELLO that reports no
// address.

#include <cstdint>
#include <vector>

#include "rendezvous/auth/auth_protocol.hpp"

namespace ddp::rdzv::auth::test {

inline std::vector<std::uint8_t> challenge_of(std::uint8_t fill) {
  return std::vector<std::uint8_t>(kChallengeBytes, fill);
}

inline std::vector<std::uint8_t> hello_without_address() { return hello_bytes({}); }

}  // namespace ddp::rdzv::auth::test
