#pragma once
// One HTTP connection to one etcd member, plain or TLS (shared by unary calls and watches):
// opening it (resolve, connect, handshake), sending, reading, deadlines and closing.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <tuple>

#include "rendezvous/etcd/etcd_client.hpp"

namespace ddp::rdzv::etcd::detail {

class Connection {
 public:
  Connection(boost::beast::tcp_stream tcp, std::shared_ptr<TlsContext> tls);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // A deadline for every operation from now on (beast::error::timeout when it passes).
  void expires_after(std::chrono::milliseconds timeout) { tcp().expires_after(timeout); }
  void expires_never() { tcp().expires_never(); }
  // Closes the socket; an operation in flight completes with an error.
  void close();

  // The client half of the TLS handshake, checking the member's certificate and its name or
  // IP against `member`. Throws TlsError or IoError ("TLS handshake: ..."). REQUIRES: TLS.
  boost::asio::awaitable<void> handshake(const Member& member);
  // Writes all of `bytes`. Throws IoError ("send: ...").
  boost::asio::awaitable<void> send_all(const std::string& bytes);
  // Reads what is there; errors come back as values (eof ends a close-delimited body).
  boost::asio::awaitable<std::tuple<boost::system::error_code, std::size_t>> read_some(
      boost::asio::mutable_buffer buffer);

 private:
  struct Tls;
  boost::beast::tcp_stream& tcp();

  std::unique_ptr<boost::beast::tcp_stream> plain_;  // plain http, or
  std::unique_ptr<Tls> tls_;                         // https: the TLS stream over TCP
};

// Resolves and connects within `timeout`, then shakes hands when the client uses TLS. Throws
// IoError ("connect: ..."), or TlsError for a handshake the member or we refused.
boost::asio::awaitable<std::unique_ptr<Connection>> connect_member(
    boost::asio::any_io_executor executor, const Member& member, std::chrono::milliseconds timeout,
    const std::shared_ptr<TlsContext>& tls);

}  // namespace ddp::rdzv::etcd::detail
