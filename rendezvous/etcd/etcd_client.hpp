#pragma once
// EtcdClient: etcd's v3 API through its JSON gateway (HTTP/1.1 over Boost.Beast) on the agent's
// io_context: KV range/put/txn, leases (grant, keep-alive, revoke) and streamed watches. The
// client knows every member of the cluster and fails over between them: an operation that a
// member cannot serve (refused, reset, timed out, no leader) moves to the next member, and fails
// only when every member has failed for the whole failover window. Errors name the member(s)
// and the operation. Plain http, or https with a TlsContext (etcd_tls.hpp). Single-threaded;
// share it with shared_ptr (watches keep it alive).

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/etcd/etcd_kv.hpp"

namespace ddp::rdzv::etcd {

struct TlsContext;
namespace detail {
class Connection;
}

struct Member {
  std::string host;
  std::uint16_t port = 2379;
  std::string to_string() const;  // "host:port" ("[v6]:port")
};

struct ClientOptions {
  std::vector<Member> members;                                          // at least one
  std::chrono::milliseconds attempt_timeout{std::chrono::seconds(5)};   // one member, one call
  std::chrono::milliseconds failover_window{std::chrono::seconds(60)};  // every member failing
  std::size_t first_member = 0;     // where calls start (modulo the members): spreads many agents
  std::shared_ptr<TlsContext> tls;  // https when set (make_tls_context), plain http otherwise
  // etcd's user/password authentication: with a user, the client gets a token from
  // /v3/auth/authenticate before its first call and sends it with every request (watches too),
  // and gets a fresh one when a member says it is invalid (expired, or another member's).
  std::string user;
  std::string password;
};

class EtcdWatch;

class EtcdClient final : public EtcdKv, public std::enable_shared_from_this<EtcdClient> {
 public:
  // REQUIRES: options.members is not empty.
  EtcdClient(asio::any_io_executor executor, ClientOptions options);
  ~EtcdClient() override;

  // Each operation throws IoError naming the operation and every member's last error when no
  // member answered within the failover window (or `window` where given), and IoError naming
  // the member when one answered with a non-retryable error. A keep-alive gives one member at
  // most `per_member` of its window, so that a silent member leaves time to reach another before
  // the lease expires.
  asio::awaitable<RangeResponse> range(RangeRequest request) override;
  asio::awaitable<std::int64_t> put(PutRequest request) override;
  asio::awaitable<TxnResponse> txn(TxnRequest request, std::string what) override;
  asio::awaitable<LeaseGrant> lease_grant(std::int64_t ttl_seconds) override;
  asio::awaitable<std::int64_t> lease_keepalive(std::int64_t id, std::chrono::milliseconds window,
                                                std::chrono::milliseconds per_member) override;
  asio::awaitable<void> lease_revoke(std::int64_t id, std::chrono::milliseconds window) override;
  // The watch reconnects to another member on its own, resuming after the last revision it
  // delivered.
  std::shared_ptr<KvWatch> watch(std::string key, std::string range_end,
                                 std::int64_t start_revision, bool prev_kv) override;

  std::chrono::milliseconds failover_window() const override { return options_.failover_window; }
  std::string endpoint() const override { return options_.members[current_].to_string(); }

 private:
  friend class EtcdWatch;
  struct Attempt;

  // `per_member`: the most one member gets (0: the attempt timeout).
  asio::awaitable<std::string> call(std::string path, std::string body, std::string op,
                                    std::chrono::milliseconds window,
                                    std::chrono::milliseconds per_member = {});
  asio::awaitable<Attempt> attempt(std::size_t member, const std::string& path,
                                   const std::string& body, std::chrono::milliseconds timeout);
  // Gets a fresh token for options_.user (/v3/auth/authenticate, with failover). Throws
  // ConfigError naming the user when etcd refuses the password, IoError as call() does.
  asio::awaitable<void> authenticate(std::chrono::milliseconds window);
  // "m1: error; m2: error" over the members with an error.
  std::string member_report(const std::vector<std::string>& errors) const;
  // Moves on from `member` (when it is still the current one) and tells the watches on it.
  void fail_over(std::size_t member);

  asio::any_io_executor executor_;
  ClientOptions options_;
  std::size_t current_ = 0;
  std::vector<std::unique_ptr<detail::Connection>> idle_;  // kept alive, on the current member
  std::vector<std::weak_ptr<EtcdWatch>> watches_;
  std::string token_;  // etcd's auth token for options_.user ("" before the first call)
};

// One watch stream (EtcdClient::watch).
class EtcdWatch final : public KvWatch, public std::enable_shared_from_this<EtcdWatch> {
 public:
  EtcdWatch(std::shared_ptr<EtcdClient> client, std::string key, std::string range_end,
            std::int64_t start_revision, bool prev_kv);
  ~EtcdWatch() override;

  // Fails for good when every member was unreachable for the failover window, or the history it
  // resumes from was compacted.
  asio::awaitable<std::optional<WatchResponse>> next(Clock::time_point deadline) override;
  void cancel() override;  // closes the stream

 private:
  friend class EtcdClient;
  void start();
  asio::awaitable<void> run();
  asio::awaitable<void> stream_once(std::size_t member, bool& created);
  void reconnect_if_on(std::size_t member);

  std::shared_ptr<EtcdClient> client_;
  std::string key_;
  std::string range_end_;
  std::int64_t next_revision_;
  bool prev_kv_;
  bool stopped_ = false;
  std::optional<std::size_t> member_;  // the member the stream is on
  std::unique_ptr<detail::Connection> stream_;
  std::deque<WatchResponse> queue_;
  std::exception_ptr error_;
  asio::steady_timer signal_;  // cancelled to wake next()
};

}  // namespace ddp::rdzv::etcd
