#pragma once
// ServerHandshake: the server's side of the store handshake (auth_protocol.hpp) for one
// connection, sans-IO: it takes the connection's first bytes, says what to send back, and ends
// in one of three states: authenticated, plain (the peer speaks TCPStore without a HELLO), or
// refused. Owned by the connection; single-threaded.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "rendezvous/auth/auth_protocol.hpp"

namespace ddp::rdzv::auth {

class ServerHandshake {
 public:
  enum class Status {
    kNeedMore,       // every byte given was consumed; more are needed
    kAuthenticated,  // the peer proved it holds the secret; the rest of the input is TCPStore
    kPlain,          // no HELLO (or this server holds no secret): the input is TCPStore
    kRefused,        // a bad HELLO or a wrong tag: error() says which; close after sending `out`
  };
  struct Result {
    Status status;
    std::size_t consumed;  // bytes of the input that belonged to the handshake
  };

  // `credentials`: the server's secret and run id; null when it holds none (a HELLO is answered
  // kNotRequired and the connection goes on as plain TCPStore). `challenge`: kChallengeBytes
  // fresh random bytes (random_bytes(); tests pass fixed ones). REQUIRES: challenge has
  // kChallengeBytes bytes when credentials are given.
  ServerHandshake(std::shared_ptr<const Credentials> credentials,
                  std::vector<std::uint8_t> challenge);

  // Consumes handshake bytes from `data` and appends what the server must send to `out`. Once it
  // returned anything but kNeedMore it must not be called again.
  Result feed(std::span<const std::uint8_t> data, std::vector<std::uint8_t>& out);

  // Why the handshake was refused ("" otherwise).
  const std::string& error() const { return error_; }
  // True until the peer sent a byte.
  bool is_idle() const { return step_ == Step::kFirst; }

 private:
  enum class Step { kFirst, kHello, kTag, kDone };

  // Copies up to `want` bytes into got_; true once it holds `want`.
  bool gather(std::span<const std::uint8_t> data, std::size_t& pos, std::size_t want);
  Result refuse(std::string why, std::size_t consumed, std::vector<std::uint8_t>& out);

  std::shared_ptr<const Credentials> credentials_;
  std::vector<std::uint8_t> challenge_;
  Step step_ = Step::kFirst;
  std::vector<std::uint8_t> got_;  // the part of the HELLO or the tag received so far
  std::string error_;
};

}  // namespace ddp::rdzv::auth
