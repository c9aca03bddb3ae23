#pragma once
// The store handshake's bytes (docs/protocol.md, "Authentication"), shared by the server's stage
// (server_handshake.hpp) and the client's connect (store_connection.cpp). Sans-IO.
//
//   client: HELLO      DD 'd' 'd' 'p' 'r' 'u' 'n' 02          (8 bytes; 0xDD starts no TCPStore
//                                                              request of either dialect)
//                      n, then n addresses: length (4|16), bytes   (the client node's addresses,
//                                                              loopback excluded; n <= 32)
//   server: 01 + 32-byte challenge                             (the server holds a secret)
//        or 04 + 32-byte challenge                             (the server takes munge credentials)
//        or 00                                                 (it holds none: plain TCPStore)
//   client, after 01: 32-byte tag = HMAC-SHA256(secret, kTagContext || run_id || 00 || challenge)
//   client, after 04: u16 length (big-endian), then a munge credential (text, <= 4096 bytes)
//                     whose payload is kMungeContext || run_id || 00 || challenge
//   server: 02 (accepted: TCPStore requests follow)  or  03 (refused; the server closes)
//
// The challenge is fresh for every connection, so a tag or credential captured on the wire
// answers nothing later; the secret itself never crosses the wire.

#include <boost/asio/ip/address.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/auth/credentials.hpp"
#include "rendezvous/auth/hmac.hpp"

namespace ddp::rdzv::auth {

inline constexpr std::array<std::uint8_t, 8> kHello = {0xDD, 'd', 'd', 'p', 'r', 'u', 'n', 0x02};
inline constexpr std::size_t kChallengeBytes = 32;
// The most addresses a HELLO reports (a node with more reports its first 32).
inline constexpr std::size_t kMaxReportedAddresses = 32;
// The longest munge credential accepted (one for our 60-byte payload is about 200).
inline constexpr std::size_t kMaxMungeCredentialBytes = 4096;
// What the tag is an HMAC of, before the run id: names the protocol and its version, so that a
// tag is never valid for another use of the same secret.
inline constexpr std::string_view kTagContext{"ddprun store auth v1", 21};  // with its NUL
// What a munge credential's payload starts with, for the same reason.
inline constexpr std::string_view kMungeContext{"ddprun store munge v1", 22};  // with its NUL

// The server's one-byte answers.
enum class Verdict : std::uint8_t {
  kNotRequired = 0,     // to HELLO: this server holds no secret
  kChallenge = 1,       // to HELLO: 32 challenge bytes follow; answer with the tag
  kAccepted = 2,        // to the tag or credential
  kRefused = 3,         // to the tag or credential (or a bad HELLO); the connection closes
  kMungeChallenge = 4,  // to HELLO: 32 challenge bytes follow; answer with a munge credential
};

// True for an address a node reports as its own to the job's stores: not loopback (always
// admitted), unspecified or IPv6 link-local.
bool is_reportable(const boost::asio::ip::address& address);

// HELLO followed by the reportable `addresses` (at most kMaxReportedAddresses).
std::vector<std::uint8_t> hello_bytes(const std::vector<boost::asio::ip::address>& addresses);

// The tag that answers `challenge` for `credentials`.
Tag auth_tag(const Credentials& credentials, std::span<const std::uint8_t> challenge);

// The payload of the munge credential that answers `challenge` for run `run_id`.
std::string munge_payload(const std::string& run_id, std::span<const std::uint8_t> challenge);

// True when `data` (the first bytes of a connection, any length >= 1) starts like a HELLO.
inline bool starts_like_hello(std::span<const std::uint8_t> data) {
  return !data.empty() && data[0] == kHello[0];
}

}  // namespace ddp::rdzv::auth
