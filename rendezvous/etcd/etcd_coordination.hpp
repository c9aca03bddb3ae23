#pragma once
// EtcdCoordination: Coordination over etcd v3 (any EtcdKv: the gateway client, or MemoryEtcd in
// tests). A tally is a key prefix (ending in '/'): a node's arrival is the key <tally><node>,
// bound to the node's lease, put and counted in one transaction, so that nothing is
// read-modify-written by every node. create is a create-revision-0 transaction, get one
// transaction of reads, put one of puts, wait_for a read and a watch from just after it. Keys
// are absolute (/ddprun/<run_id>/...). The EtcdKv must outlive it.

#include <functional>

#include "rendezvous/engine/coordination.hpp"
#include "rendezvous/etcd/etcd_kv.hpp"

namespace ddp::rdzv::etcd {

class EtcdCoordination final : public Coordination {
 public:
  // `lease`: the lease a node's arrivals are bound to (0: none), asked at each arrival.
  EtcdCoordination(EtcdKv& kv, std::function<std::int64_t()> lease)
      : kv_(kv), lease_(std::move(lease)) {}

  asio::awaitable<std::int64_t> arrive(std::string tally, std::string node) override;
  asio::awaitable<std::int64_t> count(std::string tally) override;
  asio::awaitable<Bytes> create(std::string key, Bytes value) override;
  asio::awaitable<std::vector<std::optional<Bytes>>> get(std::vector<std::string> keys) override;
  asio::awaitable<void> put(std::vector<std::pair<std::string, Bytes>> kvs) override;
  asio::awaitable<bool> wait_for(std::string key, std::chrono::milliseconds timeout) override;

 private:
  EtcdKv& kv_;
  std::function<std::int64_t()> lease_;
};

}  // namespace ddp::rdzv::etcd
