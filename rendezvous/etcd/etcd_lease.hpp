#pragma once
// The lease an etcd rendezvous node holds, and its keep-alive coroutine: a keep-alive every
// TTL/3, retried across members for the client's failover window. When etcd says the lease is
// gone, or no member answered in that window, the error is kept and the watcher woken: the other
// nodes count this node as lost by now, so its round is over.

#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>

#include "rendezvous/etcd/etcd_kv.hpp"
#include "rendezvous/etcd/etcd_rendezvous.hpp"

namespace ddp::rdzv::etcd {

struct EtcdRendezvous::Lease : std::enable_shared_from_this<Lease> {
  Lease(asio::any_io_executor executor, std::shared_ptr<EtcdKv> client, LeaseGrant grant,
        std::string node);

  // Starts the keep-alives (a detached coroutine that shares this object).
  void start();
  // Ends them; a later error is not reported. Idempotent.
  void stop();
  // The keep-alive loop (start() spawns it).
  static asio::awaitable<void> keep_alive(std::shared_ptr<Lease> self);

  std::shared_ptr<EtcdKv> client;
  std::int64_t id = 0;
  std::chrono::seconds ttl;
  std::string node;
  bool stopped = false;
  std::exception_ptr error;       // why the lease is lost
  std::function<void()> on_lost;  // wakes the running round's monitor
  asio::steady_timer tick;
};

}  // namespace ddp::rdzv::etcd
