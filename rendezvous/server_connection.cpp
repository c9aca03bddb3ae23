// ServerConnection: reads use async_wait(wait_read) + a non-blocking read_some into the server's
// shared buffer, so 10,000 idle connections hold no buffers. Output is queued and written by one
// async_write at a time; a client that does not read its replies stops being read from once its
// queue passes kHighWater, which bounds the memory it can make the server hold.

#include "rendezvous/server_connection.hpp"

#include "common/log.hpp"
#include "ddp/error.hpp"
#include "rendezvous/server_stats.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

namespace ddp::rdzv {
namespace asio = boost::asio;
namespace {

constexpr std::size_t kHighWater = std::size_t{16} << 20;

std::string format_peer(const asio::ip::tcp::socket& socket) {
  boost::system::error_code ec;
  const auto endpoint = socket.remote_endpoint(ec);
  if (ec) return "unknown peer";
  const auto address = endpoint.address();
  if (address.is_v6() && !address.to_v6().is_v4_mapped()) {
    return fmt::format("[{}]:{}", address.to_string(), endpoint.port());
  }
  const auto v4 = address.is_v6() ? asio::ip::make_address_v4(asio::ip::v4_mapped,
                                                               address.to_v6())
                                  : address.to_v4();
  return fmt::format("{}:{}", v4.to_string(), endpoint.port());
}

}  // namespace

ServerConnection::ServerConnection(asio::ip::tcp::socket socket, KeyTable& table,
                                   wire::Limits limits, std::span<std::uint8_t> read_buffer)
    : socket_(std::move(socket)),
      peer_(format_peer(socket_)),
      parser_(limits),
      session_(table, [this](wire::Buffer bytes) { send(std::move(bytes)); },
               limits.max_keys_per_query),
      read_buffer_(read_buffer),
      drained_(socket_.get_executor()) {}

void ServerConnection::close() {
  if (closed_) return;
  closed_ = true;
  ServerStats::add(server_stats().connections_closed);
  session_.close();
  boost::system::error_code ignored;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  drained_.cancel();
  if (auto on_close = std::exchange(on_close_, nullptr)) on_close();
}

asio::awaitable<void> ServerConnection::serve() {
  auto self = shared_from_this();
  auto log = log::get("store");
  boost::system::error_code ec;
  socket_.non_blocking(true, ec);
  socket_.set_option(asio::ip::tcp::no_delay(true), ec);
  wire::Buffer reply;
  // Asio's reactor is edge-triggered and an async_wait is not speculative: readiness that the
  // reactor saw while no wait was queued is not reported again. Between a read and the next
  // wait this coroutine does not yield, so only after a yield (the start, a backpressure pause)
  // is a read tried before waiting.
  bool read_before_waiting = true;
  while (!closed_) {
    if (!read_before_waiting) {
      co_await socket_.async_wait(asio::ip::tcp::socket::wait_read,
                                  asio::redirect_error(asio::use_awaitable, ec));
      if (closed_ || ec) break;
    }
    read_before_waiting = false;
    // Drain what the kernel has, then flush the replies of the whole batch in one write.
    bool open = true;
    while (open && !closed_) {
      const std::size_t n =
          socket_.read_some(asio::buffer(read_buffer_.data(), read_buffer_.size()), ec);
      if (ec == asio::error::would_block || ec == asio::error::try_again) break;
      if (ec || n == 0) {
        if (ec && ec != asio::error::eof && ec != asio::error::connection_reset) {
          log->debug("connection from {} failed: {}", peer_, ec.message());
        }
        open = false;
        break;
      }
      ServerStats::add(server_stats().bytes_received, n);
      open = consume(std::span<const std::uint8_t>(read_buffer_.data(), n), reply);
      if (n < read_buffer_.size()) break;
    }
    if (!reply.empty() && !closed_) send(std::exchange(reply, {}));
    if (!open) break;
    while (!closed_ && pending_.size() + in_flight_.size() > kHighWater) {
      drained_.expires_at(asio::steady_timer::time_point::max());
      co_await drained_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      read_before_waiting = true;
    }
  }
  // Let queued replies (e.g. to the request before a bad one) go out before closing.
  finished_ = true;
  session_.close();
  if (!writing_) close();
}

bool ServerConnection::consume(std::span<const std::uint8_t> data, wire::Buffer& reply) {
  while (!data.empty()) {
    const auto result = parser_.feed(data);
    data = data.subspan(result.consumed);
    if (result.status == wire::ParseStatus::kNeedMore) return true;
    if (result.status == wire::ParseStatus::kBad) {
      log::get("store")->warn("closing store connection from {}: {}", peer_, parser_.error());
      ServerStats::add(server_stats().bad_requests);
      return false;
    }
    try {
      wire::Request request = parser_.take_request();
      server_stats().count_request(request.command);
      session_.handle(std::move(request), reply);
    } catch (const std::exception& e) {  // ddp::Error, or bad_alloc for a huge reply
      log::get("store")->warn("closing store connection from {}: {}", peer_, e.what());
      ServerStats::add(server_stats().bad_requests);
      return false;
    }
  }
  return true;
}

void ServerConnection::send(wire::Buffer bytes) {
  if (closed_) return;
  if (!writing_ && pending_.empty()) {
    // Most replies fit the socket buffer: write them now, without a completion handler. An
    // error here is reported by the async_write below (never close from inside a KeyTable
    // callback).
    boost::system::error_code ec;
    const std::size_t n = socket_.write_some(asio::buffer(bytes), ec);
    if (!ec) ServerStats::add(server_stats().bytes_sent, n);
    if (!ec && n == bytes.size()) return;
    bytes.erase(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(ec ? 0 : n));
  }
  if (pending_.empty()) {
    pending_ = std::move(bytes);
  } else {
    pending_.insert(pending_.end(), bytes.begin(), bytes.end());
  }
  if (!writing_) start_write();
}

void ServerConnection::start_write() {
  if (pending_.empty() || closed_) return;
  writing_ = true;
  in_flight_ = std::move(pending_);
  pending_.clear();
  asio::async_write(socket_, asio::buffer(in_flight_),
                    [self = shared_from_this()](boost::system::error_code ec, std::size_t n) {
                      ServerStats::add(server_stats().bytes_sent, n);
                      self->writing_ = false;
                      self->in_flight_.clear();
                      if (ec) {
                        self->close();
                        return;
                      }
                      if (self->pending_.size() <= kHighWater) self->drained_.cancel();
                      if (!self->pending_.empty()) {
                        self->start_write();
                      } else if (self->finished_) {
                        self->close();
                      }
                    });
}

}  // namespace ddp::rdzv
