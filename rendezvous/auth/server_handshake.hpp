#pragma once
// ServerHandshake: the server's side of the store handshake (auth_protocol.hpp) for one
// connection, sans-IO: it takes the connection's first bytes, says what to send back, and ends
// in one of three states: authenticated, plain (the peer speaks TCPStore without a HELLO), or
// refused. A munge credential is handed back to be checked (a blocking round trip to munged,
// which the connection runs off its loop), so that the state machine itself does no I/O. Owned
// by the connection; single-threaded.

#include <boost/asio/ip/address.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
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
    kCheckMunge,     // a munge credential came: check munge_query(), then call finish_munge()
  };
  struct Result {
    Status status;
    std::size_t consumed;  // bytes of the input that belonged to the handshake
  };
  // What a munge check is asked (after kCheckMunge).
  struct MungeQuery {
    std::string credential;
    std::string payload;  // munge_payload(run id, this connection's challenge)
  };

  // `credentials`: the server's secret (or munge) and run id; null when it holds none (a HELLO
  // is answered kNotRequired and the connection goes on as plain TCPStore). `challenge`:
  // kChallengeBytes fresh random bytes (random_bytes(); tests pass fixed ones). REQUIRES:
  // challenge has kChallengeBytes bytes when credentials are given.
  ServerHandshake(std::shared_ptr<const Credentials> credentials,
                  std::vector<std::uint8_t> challenge);

  // Consumes handshake bytes from `data` and appends what the server must send to `out`. Once it
  // returned anything but kNeedMore it must not be called again.
  Result feed(std::span<const std::uint8_t> data, std::vector<std::uint8_t>& out);
  // After kCheckMunge: the credential to check and the payload it must carry.
  const MungeQuery& munge_query() const { return munge_query_; }
  // After kCheckMunge: the check's answer (nullopt: munged vouches for it). Returns
  // kAuthenticated or kRefused (consumed 0) and appends the verdict to `out`.
  Result finish_munge(const std::optional<std::string>& refusal, std::vector<std::uint8_t>& out);

  // Why the handshake was refused ("" otherwise).
  const std::string& error() const { return error_; }
  // The addresses the peer's HELLO reported (its node's; empty without a HELLO).
  const std::vector<boost::asio::ip::address>& reported_addresses() const { return reported_; }

 private:
  enum class Step { kFirst, kHello, kCount, kAddressLength, kAddress, kTag, kMungeLength,
                    kMungeCredential, kMungeCheck, kDone };

  // Copies up to `want` bytes into got_; true once it holds `want`.
  bool gather(std::span<const std::uint8_t> data, std::size_t& pos, std::size_t want);
  // Reads the address list after HELLO; true once it is complete.
  bool read_addresses(std::span<const std::uint8_t> data, std::size_t& pos);
  // Answers a complete HELLO: not required, or a challenge.
  std::optional<Result> answer_hello(std::size_t pos, std::vector<std::uint8_t>& out);
  Result accept(std::size_t consumed, std::vector<std::uint8_t>& out);
  Result refuse(std::string why, std::size_t consumed, std::vector<std::uint8_t>& out);

  std::shared_ptr<const Credentials> credentials_;
  std::vector<std::uint8_t> challenge_;
  MungeQuery munge_query_;
  Step step_ = Step::kFirst;
  std::vector<std::uint8_t> got_;  // the part of the current field received so far
  std::size_t addresses_left_ = 0;
  std::size_t field_bytes_ = 0;    // the length of the address or credential being read
  std::vector<boost::asio::ip::address> reported_;
  std::string error_;
};

}  // namespace ddp::rdzv::auth
