// ReformChannel: one accept loop and one read loop per worker connection, all coroutines on the
// agent's loop. Waiters sleep on their own deadline timer, which any change (a hello, a
// reformed line, a closed connection) cancels, as WorkerGroup wakes its waiters.

#include "agent/process/reform_channel.hpp"

#include <fmt/format.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <deque>
#include <map>
#include <set>

#include "common/detached_error.hpp"
#include "common/log.hpp"
#include "common/reform_protocol.hpp"
#include "ddp/error.hpp"

namespace ddp::agent {

namespace asio = boost::asio;
using asio::local::stream_protocol;

namespace {

struct Connection {
  explicit Connection(stream_protocol::socket s) : socket(std::move(s)) {}
  stream_protocol::socket socket;
  int local_rank = -1;  // set by hello
  int pid = 0;          // set by hello
  int reformed = -1;    // the last round it reported re-formed in
  bool closed = false;
  std::deque<std::string> outbox;  // lines not written yet; the front one is being written
};

// The completion of every loop: they take errors as values, so what reaches here is a bug or
// bad_alloc; one connection's loop ends, the agent goes on.
const auto log_failure = log_if_thrown("agent", spdlog::level::warn, "reform channel");

}  // namespace

std::string encode_place_line(const WorkerPlace& place) {
  return reform::encode_place(reform::Place{place.round, place.env});
}

struct ReformChannel::Impl : std::enable_shared_from_this<Impl> {
  Impl(asio::io_context& io_context, std::string where)
      : io(io_context), acceptor(io_context), address(std::move(where)) {}

  asio::io_context& io;
  stream_protocol::acceptor acceptor;
  std::string address;    // what workers are told: the path, or "@name"
  std::string file_path;  // removed at the end ("" for an abstract socket)
  std::map<int, std::shared_ptr<Connection>> by_rank;  // the latest hello per local rank
  std::map<int, WorkerPlace> places;                   // the current round's, by local rank
  std::set<asio::steady_timer*> waiters;
  bool closing = false;

  void changed() {
    for (asio::steady_timer* timer : waiters) timer->cancel();
  }

  // Queues `line` and starts writing unless a write is under way. Writes never block the loop.
  void send(const std::shared_ptr<Connection>& c, std::string line) {
    if (c->closed) return;
    c->outbox.push_back(std::move(line));
    if (c->outbox.size() == 1) asio::co_spawn(io, write_loop(c), log_failure);
  }

  asio::awaitable<void> write_loop(std::shared_ptr<Connection> c) {
    auto self = shared_from_this();
    while (!c->outbox.empty() && !c->closed) {
      auto [ec, n] = co_await asio::async_write(c->socket, asio::buffer(c->outbox.front()),
                                                asio::as_tuple(asio::use_awaitable));
      (void)n;
      if (ec) co_return;  // the read loop sees the close and reports it
      c->outbox.pop_front();
    }
  }

  void on_line(const std::shared_ptr<Connection>& c, const std::string& line) {
    const reform::WorkerLine parsed = reform::parse_worker_line(line);
    switch (parsed.kind) {
      case reform::WorkerLine::Kind::kHello:
        c->local_rank = parsed.local_rank;
        c->pid = parsed.pid;
        by_rank[parsed.local_rank] = c;
        log::get("agent")->debug("reform channel: hello local_rank={} pid={}", parsed.local_rank,
                                 parsed.pid);
        if (const auto it = places.find(parsed.local_rank); it != places.end()) {
          send(c, encode_place_line(it->second));
        }
        break;
      case reform::WorkerLine::Kind::kReformed:
        c->reformed = parsed.round;
        log::get("agent")->debug("reform channel: local_rank={} re-formed round={}",
                                 c->local_rank, parsed.round);
        break;
      case reform::WorkerLine::Kind::kBad:
        log::get("agent")->warn("reform channel: bad line '{}'; closing it", line);
        c->socket.close();
        return;
      case reform::WorkerLine::Kind::kUnknown:
        log::get("agent")->debug("reform channel: ignoring '{}'", line);
        break;
    }
    changed();
  }

  asio::awaitable<void> read_loop(std::shared_ptr<Connection> c) {
    auto self = shared_from_this();
    std::string buffer;
    for (;;) {
      auto [ec, n] =
          co_await asio::async_read_until(c->socket, asio::dynamic_buffer(buffer, reform::kMaxWorkerLineBytes),
                                          '\n', asio::as_tuple(asio::use_awaitable));
      if (ec) break;
      std::string line = buffer.substr(0, n - 1);
      buffer.erase(0, n);
      on_line(c, line);
    }
    c->closed = true;  // EOF: the worker exited (or closed its end); it cannot re-form now
    boost::system::error_code ignored;
    c->socket.close(ignored);
    changed();
  }

  asio::awaitable<void> accept_loop() {
    auto self = shared_from_this();
    while (!closing) {
      auto [ec, socket] = co_await acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
      if (ec) {
        if (ec == asio::error::operation_aborted || closing) co_return;
        log::get("agent")->warn("reform channel: accept failed: {}", ec.message());
        continue;
      }
      asio::co_spawn(io, read_loop(std::make_shared<Connection>(std::move(socket))), log_failure);
    }
  }

  bool has_reformed(int local_rank, int round) const {
    const auto it = by_rank.find(local_rank);
    return it != by_rank.end() && it->second->reformed >= round;
  }

  bool may_still_reform(int local_rank) const {
    const auto it = by_rank.find(local_rank);
    return it != by_rank.end() && !it->second->closed;
  }
};

ReformChannel::ReformChannel(asio::io_context& io, const std::string& path) {
  // sun_path holds 108 bytes with its NUL; run dirs under a long $TMPDIR can exceed that.
  const bool fits = path.size() < sizeof(sockaddr_un{}.sun_path);
  const std::string name = fmt::format("ddprun-reform-{}", ::getpid());
  impl_ = std::make_shared<Impl>(io, fits ? path : "@" + name);
  boost::system::error_code ec;
  stream_protocol::endpoint endpoint;
  if (fits) {
    ::unlink(path.c_str());  // a stale socket file would make bind fail with EADDRINUSE
    endpoint = stream_protocol::endpoint(path);
    impl_->file_path = path;
  } else {
    endpoint = stream_protocol::endpoint(std::string(1, '\0') + name);
  }
  impl_->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl_->acceptor.bind(endpoint, ec);
  if (!ec) impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    throw IoError(
        fmt::format("reform channel: cannot listen at {}: {}", impl_->address, ec.message()));
  }
  asio::co_spawn(io, impl_->accept_loop(), log_failure);
}

ReformChannel::~ReformChannel() {
  impl_->closing = true;
  boost::system::error_code ignored;
  impl_->acceptor.close(ignored);
  for (auto& [rank, c] : impl_->by_rank) c->socket.close(ignored);
  impl_->changed();
  if (!impl_->file_path.empty()) ::unlink(impl_->file_path.c_str());
}

std::string ReformChannel::address() const { return impl_->address; }

void ReformChannel::publish(const std::vector<WorkerPlace>& places) {
  Impl& g = *impl_;
  for (const WorkerPlace& place : places) {
    g.places[place.local_rank] = place;
    if (const auto it = g.by_rank.find(place.local_rank); it != g.by_rank.end()) {
      g.send(it->second, encode_place_line(place));
    }
  }
}

int ReformChannel::connected_pid(int local_rank) const {
  const auto it = impl_->by_rank.find(local_rank);
  return it == impl_->by_rank.end() ? 0 : it->second->pid;
}

asio::awaitable<std::vector<int>> ReformChannel::wait_reformed(int round,
                                                               const std::vector<int>& local_ranks,
                                                               std::chrono::milliseconds timeout) {
  const auto impl = impl_;
  asio::steady_timer deadline(co_await asio::this_coro::executor,
                              std::chrono::steady_clock::now() + timeout);
  for (;;) {
    std::vector<int> missing;
    bool waiting = false;  // some rank may still report
    for (int rank : local_ranks) {
      if (impl->has_reformed(rank, round)) continue;
      missing.push_back(rank);
      waiting = waiting || impl->may_still_reform(rank);
    }
    if (!waiting || std::chrono::steady_clock::now() >= deadline.expiry()) co_return missing;
    impl->waiters.insert(&deadline);
    auto [ec] = co_await deadline.async_wait(asio::as_tuple(asio::use_awaitable));
    impl->waiters.erase(&deadline);
    const auto state = co_await asio::this_coro::cancellation_state;
    if (state.cancelled() != asio::cancellation_type::none) {
      throw boost::system::system_error(asio::error::operation_aborted);
    }
    (void)ec;  // woken by a change (aborted) or by the deadline: the loop looks again
  }
}

}  // namespace ddp::agent
