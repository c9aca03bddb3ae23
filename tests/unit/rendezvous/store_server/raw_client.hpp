#pragma once
// Test helpers for the store server: the server on its own thread, and a blocking raw TCP peer
// with receive timeouts (so a broken server fails a test instead of hanging it).

#include "rendezvous/store_server/tcp_store_server.hpp"
#include "tests/unit/rendezvous/wire_fixtures.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/asio/use_future.hpp>

#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <catch2/catch.hpp>

#include <memory>
#include <optional>
#include <thread>

namespace ddp::rdzv::test {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

// A TcpStoreServer on 127.0.0.1 (or `host`), port 0, served by a background thread; `guard` says
// who may use it.
class ServerThread {
 public:
  explicit ServerThread(const std::string& host = "127.0.0.1", StoreLimits limits = {},
                        StoreGuard guard = {})
      : work_(asio::make_work_guard(io_)), server_(io_, host, 0, limits, std::move(guard)) {
    server_.start();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~ServerThread() {
    asio::post(io_, [this] { server_.stop(); work_.reset(); });
    thread_.join();
  }
  std::uint16_t port() const { return server_.port(); }
  // Runs fn on the server's thread and returns its result.
  template <typename F>
  auto on_server(F fn) {
    return asio::post(io_, asio::use_future(
                               [this, fn = std::move(fn)]() { return fn(server_); })).get();
  }
  std::size_t connection_count() {
    return on_server([](TcpStoreServer& s) { return s.connection_count(); });
  }

 private:
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  TcpStoreServer server_;
  std::thread thread_;
};

// A blocking client socket; every read gives up after 5 s.
class RawClient {
 public:
  explicit RawClient(std::uint16_t port, const std::string& host = "127.0.0.1")
      : socket_(io_) {
    socket_.connect(tcp::endpoint(asio::ip::make_address(host), port));
    timeval tv{5, 0};
    setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  void send(const ByteVec& bytes) { asio::write(socket_, asio::buffer(bytes)); }
  // Reads exactly n bytes (fails the test on EOF or timeout).
  ByteVec recv(std::size_t n) {
    ByteVec out(n);
    boost::system::error_code ec;
    asio::read(socket_, asio::buffer(out), ec);
    INFO("reading " << n << " bytes: " << ec.message());
    REQUIRE_FALSE(ec);
    return out;
  }
  ByteVec call(const ByteVec& request, std::size_t reply_bytes) {
    send(request);
    return recv(reply_bytes);
  }
  // True when the server closed the connection (EOF or reset) within 5 s.
  bool is_closed_by_server() {
    std::uint8_t byte = 0;
    boost::system::error_code ec;
    socket_.read_some(asio::buffer(&byte, 1), ec);
    return ec == asio::error::eof || ec == asio::error::connection_reset;
  }
  // True when nothing arrives within `ms` milliseconds.
  bool is_silent_for(int ms) {
    pollfd fd{socket_.native_handle(), POLLIN, 0};
    return ::poll(&fd, 1, ms) == 0;
  }
  tcp::socket& socket() { return socket_; }

 private:
  asio::io_context io_;
  tcp::socket socket_;
};

}  // namespace ddp::rdzv::test
