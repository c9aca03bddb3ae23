// Unary calls of the etcd client, with member failover. A call tries the current member; on a
// connection error, a timeout or a retryable etcd error (no leader, leader changed) it moves to
// the next member, and after a full turn over the members it backs off (50 ms doubling to 1 s)
// until the window ends. Kept-alive connections are reused only on the current member.

#include "rendezvous/etcd/etcd_client.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "ddp/error.hpp"
#include "rendezvous/engine/rdzv_log.hpp"
#include "rendezvous/etcd/etcd_connect.hpp"
#include "rendezvous/etcd/etcd_http.hpp"
#include "rendezvous/etcd/etcd_tls.hpp"

namespace ddp::rdzv::etcd {

namespace {

using std::chrono::milliseconds;

constexpr const char* kAuthenticatePath = "/v3/auth/authenticate";

// etcd 3.4's answers to a request whose token it no longer (or does not yet) know.
bool is_token_refused(const std::string& body) {
  const auto error = decode_error(body);
  if (!error) return false;
  return error->message.find("invalid auth token") != std::string::npos ||
         error->message.find("user name is empty") != std::string::npos;
}

}  // namespace

std::string Member::to_string() const {
  return host.find(':') != std::string::npos ? fmt::format("[{}]:{}", host, port)
                                             : fmt::format("{}:{}", host, port);
}

// The outcome of one call on one member: a response (any status) or why there was none.
struct EtcdClient::Attempt {
  int status = 0;  // the response's HTTP status; 0: no response
  std::string body;
  std::string error;
  bool tls_refused = false;  // TLS failed (certificates): waiting will not mend it
};

EtcdClient::EtcdClient(asio::any_io_executor executor, ClientOptions options)
    : executor_(std::move(executor)), options_(std::move(options)) {
  if (options_.members.empty()) throw InternalError("etcd client without members");
  current_ = options_.first_member % options_.members.size();
}

EtcdClient::~EtcdClient() = default;

asio::awaitable<EtcdClient::Attempt> EtcdClient::attempt(std::size_t member,
                                                         const std::string& path,
                                                         const std::string& body,
                                                         milliseconds timeout) {
  Attempt result;
  const Member& target = options_.members[member];
  // `timeout` bounds the attempt, the retry on a fresh connection included: a member that let
  // a kept-alive connection go silent (its node cut off) must not get the time twice.
  const Clock::time_point until = Clock::now() + timeout;
  for (int fresh = 0; fresh < 2 && Clock::now() < until; ++fresh) {
    timeout =
        std::max(milliseconds(1), std::chrono::duration_cast<milliseconds>(until - Clock::now()));
    std::unique_ptr<detail::Connection> stream;
    if (fresh == 0 && member == current_ && !idle_.empty()) {
      stream = std::move(idle_.back());
      idle_.pop_back();
    }
    try {
      if (!stream) {
        fresh = 1;  // a failure of a fresh connection is the member's
        stream = co_await detail::connect_member(executor_, target, timeout, options_.tls);
      }
      stream->expires_after(timeout);
      co_await stream->send_all(encode_post(target.to_string(), path, body, token_));
      ResponseReader reader;
      std::array<char, 16384> buffer;
      while (!reader.is_done()) {
        auto [err, n] = co_await stream->read_some(asio::buffer(buffer));
        if (err == asio::error::eof) {
          reader.feed_eof();
          break;
        }
        if (is_tls_error(err)) {
          // An alert after the handshake: under TLS 1.3 a member that refuses our certificate
          // says so only now ("certificate required", "unknown ca").
          throw TlsError("TLS: " + tls_error_text(err, nullptr, target.host, *options_.tls));
        }
        if (err) {
          throw IoError(err == boost::beast::error::timeout
                            ? fmt::format("no answer within {} ms", timeout.count())
                            : fmt::format("receive: {}", err.message()));
        }
        reader.feed(std::string_view(buffer.data(), n));
      }
      if (!reader.is_done()) throw IoError("the connection closed before the response");
      result.status = reader.status();
      result.body = reader.take_body();
      if (reader.keep_alive() && member == current_) {
        stream->expires_never();
        idle_.push_back(std::move(stream));
      }
      co_return result;
    } catch (const IoError& e) {
      result.error = e.what();
      result.tls_refused = dynamic_cast<const TlsError*>(&e) != nullptr;
      // A kept-alive connection the member closed while idle: try once on a fresh one.
    }
  }
  co_return result;
}

void EtcdClient::fail_over(std::size_t member) {
  if (member != current_) return;
  current_ = (current_ + 1) % options_.members.size();
  idle_.clear();
  for (const auto& weak : watches_) {
    if (const auto watch = weak.lock()) watch->reconnect_if_on(member);
  }
  std::erase_if(watches_, [](const auto& weak) { return weak.expired(); });
}

asio::awaitable<std::string> EtcdClient::call(std::string path, std::string body, std::string op,
                                              milliseconds window, milliseconds per_member) {
  const auto self = shared_from_this();  // detached callers may drop theirs mid-call
  const bool authenticates = !options_.user.empty() && path != kAuthenticatePath;
  if (authenticates && token_.empty()) co_await authenticate(window);
  bool refreshed = false;  // one new token per call: a member that refuses it again is an error
  const Clock::time_point deadline = Clock::now() + window;
  const std::size_t n = options_.members.size();
  std::vector<std::string> errors(n);
  milliseconds backoff(50);
  asio::steady_timer timer(executor_);
  for (;;) {
    std::vector<bool> refused(n);  // members whose TLS failed in this turn
    for (std::size_t tried = 0; tried < n; ++tried) {
      const std::size_t member = current_;
      // One member gets at most attempt_timeout, and while other members remain to be tried in
      // this turn, at most half of what the window has left: a keep-alive must reach another
      // member before its lease expires when this one is silent (its node cut off: no RST).
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      const milliseconds share = tried + 1 < n ? left / 2 : left;
      const milliseconds cap = per_member > milliseconds(0)
                                   ? std::min(per_member, options_.attempt_timeout)
                                   : options_.attempt_timeout;
      const milliseconds timeout =
          std::clamp(share, milliseconds(100), std::max(cap, milliseconds(100)));
      Attempt a = co_await attempt(member, path, body, timeout);
      if (authenticates && !refreshed && a.status != 0 && a.status != 200 &&
          is_token_refused(a.body)) {
        // Simple tokens expire when unused for a while and are known only to the member that
        // issued them until the cluster agrees; a fresh one is the answer to both.
        refreshed = true;
        co_await authenticate(window);
        a = co_await attempt(member, path, body, timeout);
      }
      if (a.status == 200) co_return std::move(a.body);
      const std::string& name = options_.members[member].to_string();
      if (a.status != 0) {
        const auto error = decode_error(a.body);
        const std::string message =
            error ? error->message : fmt::format("HTTP {}: {}", a.status, a.body.substr(0, 200));
        if (!error || !is_retryable(*error)) {
          throw IoError(fmt::format("etcd member {}: {} failed: {}", name, op, message));
        }
        a.error = message;
      }
      errors[member] = a.error;
      refused[member] = a.status == 0 && a.tls_refused;
      logger()->debug("etcd member {}: {} failed ({}); trying the next member", name, op, a.error);
      fail_over(member);
      if (Clock::now() >= deadline) break;
    }
    if (Clock::now() >= deadline) break;
    // Certificates do not mend by waiting: when TLS failed on every member, say so now.
    if (std::all_of(refused.begin(), refused.end(), [](bool r) { return r; })) {
      throw IoError(fmt::format("etcd {}: TLS failed with every etcd member ({})", op,
                                member_report(errors)));
    }
    timer.expires_after(
        std::min(backoff, std::chrono::duration_cast<milliseconds>(deadline - Clock::now())));
    co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    backoff = std::min(backoff * 2, milliseconds(1000));
  }
  throw IoError(fmt::format("etcd {}: no etcd member answered within {:.1f} s ({})", op,
                            std::chrono::duration<double>(window).count(), member_report(errors)));
}

asio::awaitable<void> EtcdClient::authenticate(milliseconds window) {
  const std::string op = fmt::format("authenticate(user={})", options_.user);
  std::string answer;
  try {
    answer = co_await call(kAuthenticatePath, authenticate_body(options_.user, options_.password),
                           op, window);
  } catch (const IoError& e) {
    const std::string_view what = e.what();
    if (what.find("authentication failed") == std::string_view::npos &&
        what.find("authentication is not enabled") == std::string_view::npos) {
      throw;
    }
    throw ConfigError(fmt::format("--rdzv_conf user={}: etcd refused it: {}", options_.user,
                                  e.what()));
  }
  token_ = decode_auth_token(answer, op);
  logger()->debug("etcd: authenticated as user {}", options_.user);
}

std::string EtcdClient::member_report(const std::vector<std::string>& errors) const {
  std::vector<std::string> failed;
  for (std::size_t i = 0; i < errors.size(); ++i) {
    if (!errors[i].empty()) failed.push_back(options_.members[i].to_string() + ": " + errors[i]);
  }
  return fmt::format("{}", fmt::join(failed, "; "));
}

asio::awaitable<RangeResponse> EtcdClient::range(RangeRequest request) {
  const std::string op = fmt::format("range({})", request.key);
  co_return decode_range(
      co_await call("/v3/kv/range", range_body(request), op, options_.failover_window), op);
}

asio::awaitable<std::int64_t> EtcdClient::put(PutRequest request) {
  const std::string op = fmt::format("put({})", request.key);
  co_return decode_put(co_await call("/v3/kv/put", put_body(request), op, options_.failover_window),
                       op);
}

asio::awaitable<TxnResponse> EtcdClient::txn(TxnRequest request, std::string what) {
  const std::string op = fmt::format("txn({})", what);
  co_return decode_txn(co_await call("/v3/kv/txn", txn_body(request), op, options_.failover_window),
                       op);
}

asio::awaitable<LeaseGrant> EtcdClient::lease_grant(std::int64_t ttl_seconds) {
  const std::string op = fmt::format("lease grant(ttl={}s)", ttl_seconds);
  co_return decode_lease_grant(
      co_await call("/v3/lease/grant", lease_grant_body(ttl_seconds), op, options_.failover_window),
      op);
}

asio::awaitable<std::int64_t> EtcdClient::lease_keepalive(std::int64_t id, milliseconds window,
                                                          milliseconds per_member) {
  const std::string op = fmt::format("lease keepalive({:x})", id);
  co_return decode_lease_keepalive(
      co_await call("/v3/lease/keepalive", lease_id_body(id), op, window, per_member), op);
}

asio::awaitable<void> EtcdClient::lease_revoke(std::int64_t id, milliseconds window) {
  const std::string op = fmt::format("lease revoke({:x})", id);
  try {
    co_await call("/v3/lease/revoke", lease_id_body(id), op, window);
  } catch (const IoError& e) {
    // Gone already: a revoke that one member applied but answered too late (under load), which
    // the next member then cannot find, or a lease that expired. Either way it is revoked.
    if (std::string_view(e.what()).find("lease not found") == std::string_view::npos) throw;
    logger()->debug("{}: the lease was already gone", op);
  }
}

std::shared_ptr<KvWatch> EtcdClient::watch(std::string key, std::string range_end,
                                           std::int64_t start_revision, bool prev_kv) {
  auto w = std::make_shared<EtcdWatch>(shared_from_this(), std::move(key), std::move(range_end),
                                       start_revision, prev_kv);
  watches_.push_back(w);
  w->start();
  return w;
}

}  // namespace ddp::rdzv::etcd
