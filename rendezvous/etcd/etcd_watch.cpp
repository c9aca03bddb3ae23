// A watch stream: one POST /v3/watch whose chunked response never ends. A reader coroutine
// (detached, holding the watch) cuts the body into messages and queues those with events; on a
// broken stream it reconnects to the client's current member and resumes at the revision after
// the last one delivered, so no event is lost or seen twice across a failover.

#include <fmt/format.h>

#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "ddp/error.hpp"
#include "rendezvous/engine/rdzv_log.hpp"
#include "rendezvous/etcd/etcd_client.hpp"
#include "rendezvous/etcd/etcd_connect.hpp"
#include "rendezvous/etcd/etcd_http.hpp"

namespace ddp::rdzv::etcd {

namespace {

using std::chrono::milliseconds;

// A failure that no other member can fix.
struct PermanentWatchError : IoError {
  using IoError::IoError;
};

}  // namespace

EtcdWatch::EtcdWatch(std::shared_ptr<EtcdClient> client, std::string key, std::string range_end,
                     std::int64_t start_revision, bool prev_kv)
    : client_(std::move(client)),
      key_(std::move(key)),
      range_end_(std::move(range_end)),
      next_revision_(start_revision),
      prev_kv_(prev_kv),
      signal_(client_->executor_) {}

EtcdWatch::~EtcdWatch() = default;

void EtcdWatch::start() {
  asio::co_spawn(
      client_->executor_, [self = shared_from_this()] { return self->run(); },
      [self = shared_from_this()](std::exception_ptr error) {
        if (error && !self->stopped_) self->error_ = error;
        self->signal_.cancel();
      });
}

void EtcdWatch::cancel() {
  stopped_ = true;
  if (stream_) stream_->close();
  signal_.cancel();
}

void EtcdWatch::reconnect_if_on(std::size_t member) {
  if (member_ == member && stream_) stream_->close();  // the reader moves on
}

asio::awaitable<std::optional<WatchResponse>> EtcdWatch::next(Clock::time_point deadline) {
  const auto self = shared_from_this();
  for (;;) {
    if (!queue_.empty()) {
      WatchResponse r = std::move(queue_.front());
      queue_.pop_front();
      co_return r;
    }
    if (error_) std::rethrow_exception(error_);
    if (stopped_ || Clock::now() >= deadline) co_return std::nullopt;
    signal_.expires_at(deadline);
    co_await signal_.async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

asio::awaitable<void> EtcdWatch::run() {
  const ClientOptions& options = client_->options_;
  std::optional<Clock::time_point> failing_since;
  std::vector<std::string> errors(options.members.size());
  milliseconds backoff(50);
  asio::steady_timer timer(client_->executor_);
  while (!stopped_) {
    const std::size_t member = client_->current_;
    bool created = false;
    try {
      co_await stream_once(member, created);
    } catch (const PermanentWatchError&) {
      throw;
    } catch (const IoError& e) {
      errors[member] = e.what();
    }
    if (stopped_) break;
    member_.reset();
    stream_.reset();
    const Clock::time_point now = Clock::now();
    if (created) {  // it worked for a while: a fresh failover window
      failing_since.reset();
      backoff = milliseconds(50);
    }
    if (!failing_since) failing_since = now;
    logger()->debug("etcd watch on {} via {} broke ({}); reconnecting", key_,
                    options.members[member].to_string(), errors[member]);
    client_->fail_over(member);
    if (now - *failing_since >= options.failover_window) {
      throw IoError(fmt::format("etcd watch({}): no etcd member answered within {:.1f} s ({})",
                                key_,
                                std::chrono::duration<double>(options.failover_window).count(),
                                client_->member_report(errors)));
    }
    timer.expires_after(backoff);
    co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    backoff = std::min(backoff * 2, milliseconds(1000));
  }
}

asio::awaitable<void> EtcdWatch::stream_once(std::size_t member, bool& created) {
  const Member& target = client_->options_.members[member];
  stream_ = co_await detail::connect_member(
      client_->executor_, target, client_->options_.attempt_timeout, client_->options_.tls);
  member_ = member;
  if (stopped_) co_return;
  stream_->expires_after(client_->options_.attempt_timeout);  // until the watch is created
  co_await stream_->send_all(
      encode_post(target.to_string(), "/v3/watch",
                  watch_create_body(key_, range_end_, next_revision_, prev_kv_),
                  client_->token_));
  ResponseReader reader;
  JsonObjectStream messages;
  std::array<char, 16384> buffer;
  const std::string op = fmt::format("watch({}) on {}", key_, target.to_string());
  for (;;) {
    auto [err, n] = co_await stream_->read_some(asio::buffer(buffer));
    if (stopped_) co_return;
    if (err) throw IoError(fmt::format("receive: {}", err.message()));
    reader.feed(std::string_view(buffer.data(), n));
    if (reader.has_header() && reader.status() != 200) {
      throw IoError(fmt::format("HTTP {}", reader.status()));
    }
    messages.feed(reader.take_body());
    while (auto text = messages.next()) {
      WatchResponse response = decode_watch(*text, op);
      if (response.compact_revision != 0) {
        throw PermanentWatchError(fmt::format("etcd {}: history before revision {} was compacted",
                                              op, response.compact_revision));
      }
      if (response.canceled) {
        throw IoError(fmt::format("cancelled by the server: {}", response.cancel_reason));
      }
      if (response.created) {
        created = true;
        stream_->expires_never();  // a quiet watch is a healthy one
        continue;
      }
      if (response.events.empty()) continue;
      next_revision_ = response.events.back().kv.mod_revision + 1;
      queue_.push_back(std::move(response));
      signal_.cancel();
    }
    if (reader.is_done()) throw IoError("the server ended the stream");
  }
}

}  // namespace ddp::rdzv::etcd
