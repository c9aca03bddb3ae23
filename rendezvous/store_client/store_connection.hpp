#pragma once
// StoreConnection: the transport under TcpStoreClient. One TCP connection to a TCPStore server:
// connect with exponential backoff and jitter, the 2.x handshake (VALIDATE + PING) and ddprun's
// authentication, calls that take turns on the connection, buffered request writes and
// incremental reply reads, and one deadline per call. Runs on the executor it is given
// (single-threaded); shared by TcpStoreClient and its operations in flight.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "rendezvous/store_client/tcp_store_client.hpp"
#include "rendezvous/wire/client_codec.hpp"

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
  // Closes the socket; the next call reconnects. Used after a failed or timed-out call, whose
  // reply may still be in flight and would corrupt the next one.
  void close();
  // Closes the socket for good (the owner's destructor): the call in flight, the calls waiting
  // for their turn and any later open(), send or receive throw IoError "store <what> failed at
  // H:P: the client was destroyed" when they resume, and a connect attempt or backoff pause
  // stops at once.
  void shut_down();

  // Waits until the calls before it finished (calls take turns on the connection), reconnects
  // when an earlier call failed, and starts a call named `what` ("get(/k)") with an empty
  // request() and a deadline `timeout` from now. Every send and receive until finish_call()
  // shares that deadline. Throws like open(), or IoError after shut_down().
  asio::awaitable<void> start_call(std::string what, std::chrono::milliseconds timeout);
  // Ends the call and gives the connection to the next one.
  void finish_call();
  // Renames the call in progress and gives it a deadline `timeout` from now (a wait's cancel).
  void begin_call(std::string what, std::chrono::milliseconds timeout);

  // The call's request, written with encoder().
  wire::ByteVec& request() { return request_; }
  const wire::RequestEncoder& encoder() const { return encoder_; }
  // Writes the whole buffer. Throws IoError or TimeoutError naming the call and host:port, after
  // closing the connection.
  asio::awaitable<void> send(const wire::ByteVec& bytes);
  // Reads one reply of `shape` into reply(). Throws like send().
  asio::awaitable<void> receive(wire::ReplyShape shape, std::size_t count = 1);
  // Like receive(), but returns false (connection left open, nothing consumed) when the
  // deadline passes first.
  asio::awaitable<bool> receive_or_deadline(wire::ReplyShape shape, std::size_t count = 1);
  // Sends request(), then receives its reply as receive() does.
  asio::awaitable<void> exchange(wire::ReplyShape shape, std::size_t count = 1);
  wire::ReplyDecoder& reply() { return decoder_; }

  const std::string& address() const { return address_; }

  // Throws TimeoutError "store <what> timed out after <T> at H:P" (closing the connection).
  [[noreturn]] void throw_timeout();
  // Throws IoError "store <what> failed at H:P: <why>" (closing the connection).
  [[noreturn]] void throw_io(const std::string& why);

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
  bool is_open() const;
  void arm(std::chrono::steady_clock::time_point deadline);
  bool deadline_passed() const;
  // Throws IoError "store <what> failed at H:P: the client was destroyed".
  [[noreturn]] void throw_shut_down(const std::string& what) const;

  asio::any_io_executor executor_;
  std::string host_;
  std::uint16_t port_;
  std::string address_;
  ConnectOptions options_;
  wire::RequestEncoder encoder_;
  wire::ReplyDecoder decoder_;
  std::shared_ptr<Socket> socket_;
  asio::steady_timer backoff_;  // open()'s pause between attempts; shut_down() cancels it
  asio::steady_timer turn_;     // a condition variable: the calls waiting for the connection
  bool busy_ = false;           // a call holds the connection
  bool shut_down_ = false;
  std::unique_ptr<std::uint8_t[]> read_buf_;  // kReadBufferBytes, not zeroed
  std::size_t read_begin_ = 0;
  std::size_t read_end_ = 0;
  wire::ByteVec request_;
  std::string what_;
  std::chrono::milliseconds call_timeout_{0};
};

// "30s" for whole seconds, else "1500ms": how durations appear in error messages.
std::string format_duration(std::chrono::milliseconds d);

// The pause before the next connect attempt: a random duration in [backoff/2, backoff] (at least
// 1 ms).
std::chrono::milliseconds jittered(std::chrono::milliseconds backoff);

}  // namespace ddp::rdzv::detail
