#pragma once
// ServerConnection: one accepted store socket. Its serve() coroutine waits for readability, reads
// what is there into a buffer shared by every connection, parses and serves it; replies and
// wake-ups go out through a write queue. Idle connections cost a socket and a small object.

#include "rendezvous/server_key_table.hpp"
#include "rendezvous/server_session.hpp"
#include "rendezvous/wire/request_parser.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <functional>
#include <memory>
#include <span>
#include <string>

namespace ddp::rdzv {

class ServerConnection : public std::enable_shared_from_this<ServerConnection> {
 public:
  // `read_buffer` is shared by every connection of the server (one thread).
  ServerConnection(boost::asio::ip::tcp::socket socket, KeyTable& table, wire::Limits limits,
                   std::span<std::uint8_t> read_buffer);

  // Serves requests until the peer closes, sends bad input, or close() is called.
  boost::asio::awaitable<void> serve();
  // Closes the socket and detaches from the table (the table may be destroyed after this).
  void close();
  // Called once, from close(): the server forgets the connection. The caller of close() must
  // hold a reference of its own.
  void set_on_close(std::function<void()> on_close) { on_close_ = std::move(on_close); }

  // "host:port" of the peer, for log lines.
  const std::string& peer() const { return peer_; }

 private:
  void send(wire::Buffer bytes);
  void start_write();
  // Serves every complete request in data; false (after logging) when the input is bad.
  bool consume(std::span<const std::uint8_t> data, wire::Buffer& reply);

  boost::asio::ip::tcp::socket socket_;
  std::string peer_;
  wire::RequestParser parser_;
  ServerSession session_;
  std::span<std::uint8_t> read_buffer_;
  wire::Buffer pending_;    // queued output not yet handed to the socket
  wire::Buffer in_flight_;  // output of the async_write in progress
  bool writing_ = false;
  bool finished_ = false;  // serve() has returned; close once the queue is written
  bool closed_ = false;
  boost::asio::steady_timer drained_;
  std::function<void()> on_close_;  // cancelled when queued output falls below the high mark
};

}  // namespace ddp::rdzv
