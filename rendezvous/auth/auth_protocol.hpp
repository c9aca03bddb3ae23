#pragma once
// The store handshake's bytes (docs/protocol.md, "Authentication"), shared by the server's stage
// (server_handshake.hpp) and the client's connect (store_connection.cpp). Sans-IO.
//
//   client: HELLO      DD 'd' 'd' 'p' 'r' 'u' 'n' 01          (8 bytes; 0xDD starts no TCPStore
//                                                              request of either dialect)
//   server: 01 + 32-byte challenge                             (the server holds a secret)
//        or 00                                                 (it holds none: plain TCPStore)
//   client: 32-byte tag = HMAC-SHA256(secret, kTagContext || run_id || 00 || challenge)
//   server: 02 (accepted: TCPStore requests follow)  or  03 (refused; the server closes)
//
// The challenge is fresh for every connection, so a tag captured on the wire answers nothing
// later; the secret itself never crosses the wire.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "rendezvous/auth/credentials.hpp"
#include "rendezvous/auth/hmac.hpp"

namespace ddp::rdzv::auth {

inline constexpr std::array<std::uint8_t, 8> kHello = {0xDD, 'd', 'd', 'p', 'r', 'u', 'n', 0x01};
inline constexpr std::size_t kChallengeBytes = 32;
// What the tag is an HMAC of, before the run id: names the protocol and its version, so that a
// tag is never valid for another use of the same secret.
inline constexpr std::string_view kTagContext{"ddprun store auth v1", 21};  // with its NUL

// The server's one-byte answers.
enum class Verdict : std::uint8_t {
  kNotRequired = 0,  // to HELLO: this server holds no secret
  kChallenge = 1,    // to HELLO: 32 challenge bytes follow
  kAccepted = 2,     // to the tag
  kRefused = 3,      // to the tag (or a bad HELLO); the connection closes
};

// The tag that answers `challenge` for `credentials`.
Tag auth_tag(const Credentials& credentials, std::span<const std::uint8_t> challenge);

// True when `data` (the first bytes of a connection, any length >= 1) starts like a HELLO.
inline bool starts_like_hello(std::span<const std::uint8_t> data) {
  return !data.empty() && data[0] == kHello[0];
}

}  // namespace ddp::rdzv::auth
