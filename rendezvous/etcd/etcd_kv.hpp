#pragma once
// EtcdKv: the etcd v3 operations the etcd rendezvous uses (KV range, put and transactions,
// leases, watches), as an interface: EtcdClient speaks them to a cluster through the JSON gateway
// (etcd_client.hpp), the tests' MemoryEtcd keeps them in memory on a clock the test controls
// (tests/unit/rendezvous/etcd/memory_etcd.hpp). Both run on one io_context and are
// single-threaded; share them with shared_ptr (watches keep them alive).

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "rendezvous/etcd/etcd_json.hpp"

namespace ddp::rdzv::etcd {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

// One watch of a key range. Responses queue up until next() takes them.
class KvWatch {
 public:
  virtual ~KvWatch() = default;
  // The next response with events, or nullopt once `deadline` passes or the watch is cancelled.
  // Throws IoError when the watch failed for good. One waiter at a time.
  virtual asio::awaitable<std::optional<WatchResponse>> next(Clock::time_point deadline) = 0;
  // Stops the watch; a waiting next() returns nullopt. Idempotent.
  virtual void cancel() = 0;
};

class EtcdKv {
 public:
  virtual ~EtcdKv() = default;

  // Each operation throws IoError naming the operation when etcd cannot serve it.
  virtual asio::awaitable<RangeResponse> range(RangeRequest request) = 0;
  virtual asio::awaitable<std::int64_t> put(PutRequest request) = 0;  // the put's revision
  virtual asio::awaitable<TxnResponse> txn(TxnRequest request, std::string what) = 0;
  virtual asio::awaitable<LeaseGrant> lease_grant(std::int64_t ttl_seconds) = 0;
  // The remaining TTL; 0 when the lease is gone (expired or revoked). `window`: how long the
  // call may retry; `per_member`: the most one member of a cluster gets.
  virtual asio::awaitable<std::int64_t> lease_keepalive(std::int64_t id,
                                                        std::chrono::milliseconds window,
                                                        std::chrono::milliseconds per_member) = 0;
  // A lease that is already gone counts as revoked. Deletes every key bound to it.
  virtual asio::awaitable<void> lease_revoke(std::int64_t id, std::chrono::milliseconds window) = 0;
  // Watches [key, range_end) ("" range_end: the key alone) from start_revision (0: from now).
  virtual std::shared_ptr<KvWatch> watch(std::string key, std::string range_end,
                                         std::int64_t start_revision, bool prev_kv) = 0;

  // How long a call may retry before it fails (a keep-alive's window).
  virtual std::chrono::milliseconds failover_window() const = 0;
  // Where calls go now, for logs ("10.0.0.1:2379").
  virtual std::string endpoint() const = 0;
};

}  // namespace ddp::rdzv::etcd
