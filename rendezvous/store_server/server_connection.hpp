#pragma once
// ServerConnection: one accepted store socket, on the server's io_context. Its serve() coroutine
// takes turns: wait for input into a small buffer of its own, then read at most one buffer
// (shared by every connection) while more is there, serve the requests, yield. Replies and
// wake-ups go out through an OutputQueue. A client that does not read its replies stops being
// read once max_queued_bytes are queued for it.

#include <array>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "rendezvous/auth/blocking_call.hpp"
#include "rendezvous/store/key_table.hpp"
#include "rendezvous/store_server/server_admission.hpp"
#include "rendezvous/store_server/server_output_queue.hpp"
#include "rendezvous/store_server/server_session.hpp"
#include "rendezvous/store_server/tcp_store_server.hpp"
#include "rendezvous/wire/request_parser.hpp"

namespace ddp::rdzv {

// The peer's address, canonical (auth::canonical_address); unspecified when the socket has none.
boost::asio::ip::address peer_address(const boost::asio::ip::tcp::socket& socket);

class ServerConnection : public std::enable_shared_from_this<ServerConnection> {
 public:
  // `read_buffer` is shared by every connection of the server (one thread); its size is the most
  // a connection reads in one turn. `guard` says who may use the store: the connection passes
  // its admission stage (server_admission.hpp) before its first request.
  ServerConnection(boost::asio::ip::tcp::socket socket, KeyTable& table, const StoreLimits& limits,
                   std::span<std::uint8_t> read_buffer, const StoreGuard& guard = {});

  // Serves requests until the peer closes, sends bad input, or close() is called.
  boost::asio::awaitable<void> serve();
  // Closes the socket and detaches from the table (the table may be destroyed after this).
  void close();
  // Called once, from close(): the server forgets the connection. The caller of close() must
  // hold a reference of its own.
  void set_on_close(std::function<void()> on_close) { on_close_ = std::move(on_close); }

  // "host:port" of the peer, for log lines.
  const std::string& peer() const { return peer_; }
  // Output queued and not yet written.
  std::size_t queued_bytes() const { return out_.size(); }

 private:
  enum class Turn { kDrained, kMore, kPaused, kClosed };

  // The places of a connection's life, each in one function: accepted (start_connection in
  // tcp_store_server.cpp), bytes read (after_read), a request served (serve_request), bytes
  // written (after_write), closed (close, then the server's on_close). read_turn() reads and
  // serves one turn; flush() and the write completions write.
  Turn read_turn();
  // Serves the first `n` bytes of `buffer` that a read filled (first_read_ or the shared one);
  // kMore when it filled all of it.
  Turn serve_read(std::span<const std::uint8_t> buffer, std::size_t n);
  void after_read(std::size_t n);
  void log_read_error(const boost::system::error_code& ec) const;
  // Serves every complete request in data, stopping at the queue limit (the rest is kept in
  // unread_). False (after logging) when the input is bad or a request cannot be served.
  Turn serve_input(std::span<const std::uint8_t> data);
  // Passes input to the admission stage until the connection is open. Returns the turn to end
  // with when it must stop here: refused (kClosed), or a munge check started (kPaused: the rest
  // of `data` waits in unread_).
  std::optional<Turn> admit(std::span<const std::uint8_t>& data);
  // Runs the admission's munge check off the loop; its answer resumes the connection.
  void start_check();
  void finish_check(const std::optional<std::string>& refusal);
  void watch_handshake();
  bool serve_request(wire::Request request);
  void after_write(std::size_t n);
  // Not read meanwhile: its output is over the limit, or a munge check is running.
  bool is_paused() const { return check_ || out_.size() >= limits_.max_queued_bytes; }

  // Output pushed by the table (a woken WAIT, a watch event), not in reply to a request.
  void push(wire::Buffer bytes);
  // Writes what is queued: at once as far as the socket takes it, the rest asynchronously.
  void flush();
  std::size_t gather();
  void start_write();
  void watch_partial_request();
  void close_later(std::string why);

  boost::asio::ip::tcp::socket socket_;
  std::string peer_;
  StoreLimits limits_;
  ServerAdmission admission_;
  wire::RequestParser parser_;
  ServerSession session_;
  std::span<std::uint8_t> read_buffer_;
  // Where the read that waits for input puts it: one small request (a heartbeat) fits.
  std::array<std::uint8_t, 128> first_read_{};
  wire::Buffer unread_;  // input read but not served: the queue passed its limit mid-buffer
  OutputQueue out_;
  std::array<boost::asio::const_buffer, 16> pieces_;  // of the write in progress
  bool in_turn_ = false;   // serving requests: pushes wait for the turn's flush
  bool writing_ = false;
  bool finished_ = false;  // serve() has returned; close once the queue is written
  bool closed_ = false;
  bool closing_ = false;   // close_later() was called
  boost::asio::steady_timer drained_;  // cancelled when the queue falls below the limit
  boost::asio::steady_timer partial_;  // armed while part of a request is held
  bool partial_armed_ = false;
  std::optional<boost::asio::steady_timer> handshake_;  // armed while a handshake is owed
  std::shared_ptr<auth::BlockingCall> check_;  // the munge check running off the loop
  std::chrono::steady_clock::time_point last_input_;
  std::function<void()> on_close_;
};

}  // namespace ddp::rdzv
