// ServerConnection: reads use async_wait(wait_read) + a non-blocking read_some into the server's
// shared buffer, so idle connections hold no buffers. One turn reads at most one buffer and then
// yields, so a 256 MiB value or a flood of pipelined requests is interleaved with every other
// connection. Output is written in pieces of at most kWriteBytes per completion for the same
// reason, and each written chunk is freed at once.

#include "rendezvous/store_server/server_connection.hpp"

#include "common/log.hpp"
#include "ddp/error.hpp"
#include "rendezvous/store_server/server_stats.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

namespace ddp::rdzv {
namespace asio = boost::asio;
namespace {

// The most one write (synchronous or one async_write_some) hands to the kernel.
constexpr std::size_t kWriteBytes = std::size_t{1} << 20;

std::string format_peer(const asio::ip::tcp::socket& socket) {
  boost::system::error_code ec;
  const auto endpoint = socket.remote_endpoint(ec);
  if (ec) return "unknown peer";
  const auto address = auth::canonical_address(endpoint.address());
  if (address.is_v6()) return fmt::format("[{}]:{}", address.to_string(), endpoint.port());
  return fmt::format("{}:{}", address.to_string(), endpoint.port());
}

}  // namespace

asio::ip::address peer_address(const asio::ip::tcp::socket& socket) {
  boost::system::error_code ec;
  const auto endpoint = socket.remote_endpoint(ec);
  return ec ? asio::ip::address() : auth::canonical_address(endpoint.address());
}

ServerConnection::ServerConnection(asio::ip::tcp::socket socket, KeyTable& table,
                                   const StoreLimits& limits, std::span<std::uint8_t> read_buffer,
                                   const StoreGuard& guard)
    : socket_(std::move(socket)),
      peer_(format_peer(socket_)),
      limits_(limits),
      admission_(guard, peer_address(socket_)),
      parser_(limits),
      session_(
          table, [this](wire::Buffer bytes) { push(std::move(bytes)); }, limits),
      read_buffer_(read_buffer),
      drained_(socket_.get_executor()),
      partial_(socket_.get_executor()) {
  parser_.set_admit_value([this](const wire::Request& partial, std::uint64_t length) {
    return session_.refuse_value(partial, length);
  });
}

void ServerConnection::close() {
  if (closed_) return;
  closed_ = true;
  ServerStats::add(server_stats().connections_closed);
  session_.close();
  boost::system::error_code ignored;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  drained_.cancel();
  partial_.cancel();
  if (handshake_) handshake_->cancel();
  if (auto check = std::exchange(check_, nullptr)) check->cancel();
  out_ = OutputQueue();
  unread_ = {};
  if (auto on_close = std::exchange(on_close_, nullptr)) on_close();
}

asio::awaitable<void> ServerConnection::serve() {
  auto self = shared_from_this();
  boost::system::error_code ec;
  socket_.non_blocking(true, ec);
  socket_.set_option(asio::ip::tcp::no_delay(true), ec);
  watch_handshake();
  // Asio's reactor is edge-triggered and knows nothing of our own read_some calls. So after
  // every yield (the start, a full buffer, a backpressure pause) a read is tried before waiting;
  // only a short read (the kernel's buffer drained) waits for the next edge.
  //
  // The wait is a read into first_read_, not an async_wait: Asio re-registers the socket with
  // epoll (an epoll_ctl) for every async_wait, but queues a read without a system call once a
  // read found the socket drained, and the reactor performs it when input comes. At 20,000
  // simulated members beating every second the epoll_ctl calls were 7 % of the store's CPU.
  bool read_before_waiting = true;
  while (!closed_) {
    Turn turn = Turn::kDrained;
    if (read_before_waiting) {
      turn = read_turn();
    } else {
      const std::size_t n = co_await socket_.async_read_some(
          asio::buffer(first_read_), asio::redirect_error(asio::use_awaitable, ec));
      if (closed_) break;
      if (ec) {
        log_read_error(ec);
        break;
      }
      turn = serve_read(first_read_, n);
    }
    flush();
    if (turn == Turn::kClosed || closed_) break;
    watch_partial_request();
    if (turn == Turn::kPaused) {
      while (!closed_ && is_paused()) {
        drained_.expires_at(asio::steady_timer::time_point::max());
        co_await drained_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      }
    } else if (turn == Turn::kMore) {
      // Others' turn: the rest of this connection's input waits in the kernel (or in unread_).
      co_await asio::post(socket_.get_executor(), asio::use_awaitable);
    }
    read_before_waiting = turn != Turn::kDrained;
  }
  // Let queued replies (e.g. to the request before a bad one) go out before closing.
  finished_ = true;
  session_.close();
  if (!writing_) close();
}

ServerConnection::Turn ServerConnection::read_turn() {
  if (admission_.is_refused()) return Turn::kClosed;  // by a munge check, while paused
  if (!unread_.empty()) {
    const wire::Buffer input = std::exchange(unread_, {});
    const Turn turn = serve_input(input);
    return turn == Turn::kDrained ? Turn::kMore : turn;  // the kernel may hold more
  }
  boost::system::error_code ec;
  const std::size_t n =
      socket_.read_some(asio::buffer(read_buffer_.data(), read_buffer_.size()), ec);
  if (ec == asio::error::would_block || ec == asio::error::try_again) return Turn::kDrained;
  if (ec || n == 0) {
    if (ec) log_read_error(ec);
    return Turn::kClosed;
  }
  return serve_read(read_buffer_, n);
}

ServerConnection::Turn ServerConnection::serve_read(std::span<const std::uint8_t> buffer,
                                                    std::size_t n) {
  after_read(n);
  const Turn turn = serve_input(buffer.first(n));
  // A full buffer: the kernel may hold more (read into the shared buffer next).
  if (turn == Turn::kDrained && n == buffer.size()) return Turn::kMore;
  return turn;
}

void ServerConnection::log_read_error(const boost::system::error_code& ec) const {
  // The peer closing or resetting, or our own close, is not a failure.
  if (ec == asio::error::eof || ec == asio::error::connection_reset ||
      ec == asio::error::operation_aborted) {
    return;
  }
  log::get("store")->debug("connection from {} failed: {}", peer_, ec.message());
}

void ServerConnection::after_read(std::size_t n) {
  last_input_ = std::chrono::steady_clock::now();
  ServerStats::add(server_stats().bytes_received, n);
}

ServerConnection::Turn ServerConnection::serve_input(std::span<const std::uint8_t> data) {
  if (!admission_.is_open()) {
    if (const auto stop = admit(data)) return *stop;
  }
  in_turn_ = true;
  Turn turn = Turn::kDrained;
  while (!data.empty()) {
    if (is_paused()) {
      // Backpressure: keep the rest (at most one read buffer) until the client reads.
      unread_.assign(data.begin(), data.end());
      turn = Turn::kPaused;
      break;
    }
    const auto result = parser_.feed(data);
    data = data.subspan(result.consumed);
    if (result.status == wire::ParseStatus::kNeedMore) break;
    if (result.status == wire::ParseStatus::kBad) {
      log::get("store")->warn("closing store connection from {}: {}", peer_, parser_.error());
      ServerStats::add(server_stats().bad_requests);
      turn = Turn::kClosed;
      break;
    }
    if (!serve_request(parser_.take_request())) {
      turn = Turn::kClosed;
      break;
    }
  }
  in_turn_ = false;
  return turn;
}

// The handshake's replies go out with the turn's flush; a refused connection's serve() ends, and
// the connection closes once the refusal byte is written.
std::optional<ServerConnection::Turn> ServerConnection::admit(std::span<const std::uint8_t>& data) {
  wire::Buffer reply;
  const auto result = admission_.feed(data, reply);
  data = data.subspan(result.consumed);
  if (!reply.empty()) out_.append(reply);
  switch (result.outcome) {
    case ServerAdmission::Outcome::kRefused:
      log_refusal_once(admission_.peer().to_string(), admission_.refusal());
      return Turn::kClosed;
    case ServerAdmission::Outcome::kChecking:
      unread_.assign(data.begin(), data.end());  // TCPStore requests sent with the credential
      start_check();
      return Turn::kPaused;
    case ServerAdmission::Outcome::kOpen:
      if (handshake_) handshake_->cancel();
      break;
    case ServerAdmission::Outcome::kNeedMore:
      break;  // then `data` is empty
  }
  return std::nullopt;
}

// munged may be slow or gone (libmunge then waits out its own timeout): the check runs off the
// loop, so only this connection waits. The handshake deadline still runs and closes a
// connection whose check outlasts it.
void ServerConnection::start_check() {
  auto check = admission_.check();
  auto refusal = std::make_shared<std::optional<std::string>>();
  auto work = [check = std::move(check), refusal] {
    try {
      *refusal = check();
    } catch (const std::exception& e) {  // no munge context (out of memory): refused
      *refusal = fmt::format("a munge credential not checked: {}", e.what());
    }
  };
  check_ = auth::BlockingCall::start(
      socket_.get_executor(), std::move(work),
      [self = shared_from_this(), refusal] { self->finish_check(*refusal); });
}

void ServerConnection::finish_check(const std::optional<std::string>& refusal) {
  check_.reset();
  if (closed_) return;
  wire::Buffer reply;
  const auto result = admission_.finish_check(refusal, reply);
  out_.append(reply);
  if (result.outcome == ServerAdmission::Outcome::kRefused) {
    log_refusal_once(admission_.peer().to_string(), admission_.refusal());
  } else if (handshake_) {
    handshake_->cancel();
  }
  drained_.cancel();  // serve() resumes: it writes the verdict, then serves or closes
}

// A stranger that connects and sends nothing holds a descriptor until this deadline; members
// get none, since PyTorch 1.13's watch connection may stay silent for the whole job.
void ServerConnection::watch_handshake() {
  if (!admission_.needs_handshake() || limits_.handshake_timeout.count() <= 0) return;
  handshake_.emplace(socket_.get_executor(), limits_.handshake_timeout);
  handshake_->async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (ec || self->closed_ || self->admission_.is_open()) return;
    ServerStats::add(server_stats().handshakes_timed_out);
    log_refusal_once(self->admission_.peer().to_string(),
                     fmt::format("a connection that did not authenticate within {} ms",
                                 self->limits_.handshake_timeout.count()));
    self->close();
  });
}

bool ServerConnection::serve_request(wire::Request request) {
  server_stats().count_request(request.command);
  try {
    session_.handle(std::move(request), out_);
    return true;
  } catch (const std::exception& e) {  // ddp::Error, or bad_alloc
    log::get("store")->warn("closing store connection from {}: {}", peer_, e.what());
    ServerStats::add(server_stats().bad_requests);
    return false;
  }
}

void ServerConnection::push(wire::Buffer bytes) {
  if (closed_ || closing_) return;
  if (out_.size() > limits_.max_queued_bytes) {
    // Called from inside another connection's request (a KeyTable callback): close later.
    close_later(fmt::format("{} bytes of output are queued for it, over the limit of {} (it "
                            "does not read what it watches)",
                            out_.size(), limits_.max_queued_bytes));
    return;
  }
  out_.append(bytes);
  if (!in_turn_) flush();
}

void ServerConnection::close_later(std::string why) {
  closing_ = true;
  log::get("store")->warn("closing store connection from {}: {}", peer_, why);
  asio::post(socket_.get_executor(), [self = shared_from_this()] { self->close(); });
}

std::size_t ServerConnection::gather() {
  std::size_t count = 0;
  out_.for_each_front(pieces_.size(), kWriteBytes, [&](std::span<const std::uint8_t> piece) {
    pieces_[count++] = asio::const_buffer(piece.data(), std::min(piece.size(), kWriteBytes));
  });
  return count;
}

void ServerConnection::flush() {
  if (writing_ || closed_ || out_.empty()) return;
  // Most replies fit the socket buffer: write them now, without a completion handler. An error
  // here is reported by the async write (never close from inside a KeyTable callback).
  boost::system::error_code ec;
  const std::size_t count = gather();
  const std::size_t n = socket_.write_some(std::span(pieces_.data(), count), ec);
  if (!ec) after_write(n);
  start_write();
}

void ServerConnection::start_write() {
  if (writing_ || closed_ || out_.empty()) return;
  writing_ = true;
  const std::size_t count = gather();
  out_.seal();
  socket_.async_write_some(std::span(pieces_.data(), count),
                           [self = shared_from_this()](boost::system::error_code ec,
                                                       std::size_t n) {
                             self->writing_ = false;
                             if (self->closed_) return;
                             if (ec) {
                               self->close();
                               return;
                             }
                             self->after_write(n);
                             self->start_write();
                           });
}

void ServerConnection::after_write(std::size_t n) {
  ServerStats::add(server_stats().bytes_sent, n);
  out_.consume(n);
  if (!is_paused()) drained_.cancel();
  if (out_.empty() && finished_) close();
}

void ServerConnection::watch_partial_request() {
  if (parser_.is_idle() || partial_armed_ || closed_) return;
  if (limits_.partial_request_timeout.count() <= 0) return;  // no limit
  partial_armed_ = true;
  partial_.expires_at(last_input_ + limits_.partial_request_timeout);
  partial_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
    self->partial_armed_ = false;
    if (ec || self->closed_ || self->parser_.is_idle()) return;
    const auto now = std::chrono::steady_clock::now();
    if (self->is_paused() || now - self->last_input_ < self->limits_.partial_request_timeout) {
      // Progress since the timer was set, or the server stopped reading it: look again later.
      if (self->is_paused()) self->last_input_ = now;
      self->watch_partial_request();
      return;
    }
    self->close_later(fmt::format("it sent part of a request and nothing more for {} ms",
                                  self->limits_.partial_request_timeout.count()));
  });
}

}  // namespace ddp::rdzv
