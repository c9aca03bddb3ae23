#pragma once
// StoreConnection: the transport under TcpStoreClient. One TCP connection to a TCPStore server:
// connect with exponential backoff and jitter, the 2.x handshake (VALIDATE + PING), buffered
// request writes and incremental reply reads, and one deadline per call. Runs on the executor it
// is given (single-threaded); owned by TcpStoreClient.

#include "rendezvous/store_client/tcp_store_client.hpp"
#include "rendezvous/wire/client_codec.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace ddp::rdzv::detail {

class StoreConnection {
 public:
  StoreConnection(asio::any_io_executor executor, std::string host, std::uint16_t port,
                  ConnectOptions options);
  ~StoreConnection();

  // Connects, retrying refused or failed attempts with exponential backoff plus jitter until
  // options.connect_timeout, then performs the dialect's handshake. Throws TimeoutError
  // "store at H:P unreachable after Ns: <last error>", or IoError when the server closes the
  // connection during the handshake (a server of the other dialect).
  asio::awaitable<void> open();
  bool is_open() const;
  // Closes the socket; the next open() reconnects. Used after a failed or timed-out call, whose
  // reply may still be in flight and would corrupt the next one.
  void close();
  // Closes the socket for good (the owner's destructor): the call in flight and any later
  // open(), send or receive throw IoError "store <what> failed at H:P: the client was
  // destroyed" when they resume, and a connect attempt or backoff pause stops at once.
  void shut_down();
  bool is_shut_down() const { return shut_down_; }

  // Starts one call named `what` ("get(/k)") with a deadline `timeout` from now. Every send and
  // receive until end_call() shares that deadline.
  void begin_call(std::string what, std::chrono::milliseconds timeout);
  void end_call();

  // Writes the whole buffer. Throws IoError or TimeoutError naming the call and host:port, after
  // closing the connection.
  asio::awaitable<void> send(const wire::ByteVec& bytes);
  // Reads one reply of `shape` into reply(). Throws like send().
  asio::awaitable<void> receive(wire::ReplyShape shape, std::size_t count = 1);
  // Like receive(), but returns false (connection left open, nothing consumed) when the
  // deadline passes first.
  asio::awaitable<bool> receive_or_deadline(wire::ReplyShape shape, std::size_t count = 1);
  wire::ReplyDecoder& reply() { return decoder_; }

  const wire::RequestEncoder& encoder() const { return encoder_; }
  const std::string& address() const { return address_; }
  std::chrono::milliseconds call_timeout() const { return call_timeout_; }

  // Throws TimeoutError "store <what> timed out after <T> at H:P" (closing the connection).
  [[noreturn]] void throw_timeout();
  // Throws IoError "store <what> failed at H:P: <why>" (closing the connection).
  [[noreturn]] void throw_io(const std::string& why);
  // Throws IoError "store <what> failed at H:P: the client was destroyed".
  [[noreturn]] void throw_shut_down(const std::string& what) const;

 private:
  struct Socket;  // socket, resolver and deadline timer, shared with the timer's handler
  asio::awaitable<void> connect_once(std::chrono::steady_clock::time_point deadline);
  asio::awaitable<void> handshake();
  // ddprun's HELLO (with this node's addresses) and the answer to the server's challenge
  // (auth_protocol.hpp): the tag, or a munge credential. Returns true when the server asked for
  // one (sent, with `after` behind it in the same write; the verdict is read next) and false
  // when it holds no secret (`after` not sent). Throws IoError, or ConfigError when the server
  // asks for what `credentials` (null: none) cannot give.
  asio::awaitable<bool> authenticate(const auth::Credentials* credentials,
                                     const wire::ByteVec& after);
  asio::awaitable<void> read_verdict();
  // Reads exactly out.size() raw bytes of a handshake reply. Throws like receive().
  asio::awaitable<void> receive_exact(std::span<std::uint8_t> out);
  void arm(std::chrono::steady_clock::time_point deadline);
  bool deadline_passed() const;

  asio::any_io_executor executor_;
  std::string host_;
  std::uint16_t port_;
  std::string address_;
  ConnectOptions options_;
  wire::RequestEncoder encoder_;
  wire::ReplyDecoder decoder_;
  std::shared_ptr<Socket> socket_;
  asio::steady_timer backoff_;  // open()'s pause between attempts; shut_down() cancels it
  bool shut_down_ = false;
  std::unique_ptr<std::uint8_t[]> read_buf_;  // kReadBufferBytes, not zeroed
  std::size_t read_begin_ = 0;
  std::size_t read_end_ = 0;
  std::string what_;
  std::chrono::milliseconds call_timeout_{0};
};

// "30s" for whole seconds, else "1500ms": how durations appear in error messages.
std::string format_duration(std::chrono::milliseconds d);

// The pause before the next connect attempt: a random duration in [backoff/2, backoff] (at least
// 1 ms).
std::chrono::milliseconds jittered(std::chrono::milliseconds backoff);

}  // namespace ddp::rdzv::detail
