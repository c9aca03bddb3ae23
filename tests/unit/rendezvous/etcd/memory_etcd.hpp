#pragma once
// MemoryEtcd: an etcd v3 cluster in memory, for unit tests of the etcd rendezvous (as MemoryStore
// is a TCPStore): revisions, transactions with compares, ranges by key or prefix (by create
// revision, limited, counted, at a past revision), watches that replay from a start revision,
// and leases whose keys go when they are revoked or expire. Time for leases is a clock the test
// moves with advance(); nothing expires on its own. Every call completes at once. Runs on one
// io_context; share it with shared_ptr.

#include <boost/asio/any_io_executor.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "rendezvous/etcd/etcd_kv.hpp"

namespace ddp::rdzv::etcd {

class MemoryEtcd final : public EtcdKv, public std::enable_shared_from_this<MemoryEtcd> {
 public:
  explicit MemoryEtcd(asio::any_io_executor executor);
  ~MemoryEtcd() override;

  asio::awaitable<RangeResponse> range(RangeRequest request) override;
  asio::awaitable<std::int64_t> put(PutRequest request) override;
  asio::awaitable<TxnResponse> txn(TxnRequest request, std::string what) override;
  asio::awaitable<LeaseGrant> lease_grant(std::int64_t ttl_seconds) override;
  asio::awaitable<std::int64_t> lease_keepalive(std::int64_t id, std::chrono::milliseconds window,
                                                std::chrono::milliseconds per_member) override;
  asio::awaitable<void> lease_revoke(std::int64_t id, std::chrono::milliseconds window) override;
  std::shared_ptr<KvWatch> watch(std::string key, std::string range_end,
                                 std::int64_t start_revision, bool prev_kv) override;
  std::chrono::milliseconds failover_window() const override { return std::chrono::seconds(1); }
  std::string endpoint() const override { return "memory"; }

  // Moves the lease clock on by `by`: every lease whose TTL has passed since its grant or last
  // keep-alive expires (its keys are deleted, one revision per lease, as etcd's lessor does).
  void advance(std::chrono::milliseconds by);
  // The store's revision: 1 when empty, one more for every write.
  std::int64_t revision() const { return revision_; }
  // Whether the lease is alive (granted, not revoked or expired).
  bool has_lease(std::int64_t id) const { return leases_.count(id) != 0; }

 private:
  class Watch;
  struct Lease {
    std::int64_t ttl = 0;                  // seconds
    std::chrono::milliseconds expires_at;  // on the lease clock
    std::set<std::string> keys;
  };
  struct Event {
    std::int64_t revision = 0;
    WatchEvent event;  // with its previous value (a watch without prev_kv drops it)
  };

  // The keys of `r` (at its revision when given), in key order or by create revision.
  RangeResponse read(const RangeRequest& r) const;
  // One write of the revision being made: a put, or the delete of an existing key.
  void write_put(const PutRequest& p, std::int64_t revision);
  void write_delete(const std::string& key, std::int64_t revision);
  bool holds(const Compare& c) const;
  // Hands the events of `revision` to every watch whose range they fall in.
  void publish(std::int64_t revision);
  // Deletes the keys of a lease in one revision and forgets it.
  void end_lease(std::int64_t id);

  asio::any_io_executor executor_;
  std::int64_t revision_ = 1;
  std::map<std::string, KeyValue> kvs_;
  std::vector<Event> history_;  // every event since the start (no compaction)
  std::map<std::int64_t, Lease> leases_;
  std::int64_t next_lease_ = 0x7a000001;
  std::chrono::milliseconds now_{0};
  std::vector<std::weak_ptr<Watch>> watches_;
};

}  // namespace ddp::rdzv::etcd
