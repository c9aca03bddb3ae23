// Keep-alives for an etcd rendezvous lease. Each is one POST to the gateway (which answers and
// ends the stream), so a keep-alive is an ordinary unary call with failover. Its window is the
// client's failover window, not what is left of the TTL: when the leader dies, the election can
// take longer than a short TTL, and the new leader extends every lease (etcd's lessor promotion),
// so a keep-alive answered after the TTL may still find the lease alive. Only etcd's answer that
// the lease is gone, or no answer for the whole window, loses it.

#include "rendezvous/etcd/etcd_lease.hpp"

#include <fmt/format.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/detached_error.hpp"
#include "ddp/error.hpp"

namespace ddp::rdzv::etcd {

using std::chrono::milliseconds;

EtcdRendezvous::Lease::Lease(asio::any_io_executor executor, std::shared_ptr<EtcdKv> c,
                             LeaseGrant grant, std::string n)
    : client(std::move(c)),
      id(grant.id),
      ttl(std::max<std::int64_t>(grant.ttl, 1)),
      node(std::move(n)),
      tick(std::move(executor)) {}

// (A coroutine that takes `self` as a parameter, which lives in its frame: a capturing
// coroutine lambda's captures live in the closure, which co_spawn may outlive.)
asio::awaitable<void> EtcdRendezvous::Lease::keep_alive(std::shared_ptr<Lease> self) {
  const milliseconds period = std::chrono::duration_cast<milliseconds>(self->ttl) / 3;
  while (!self->stopped) {
    self->tick.expires_after(period);
    co_await self->tick.async_wait(asio::as_tuple(asio::use_awaitable));
    if (self->stopped) break;
    // One member gets at most a keep-alive period: a silent one (its node cut off) leaves
    // two periods to reach another before the lease expires.
    const std::int64_t left =
        co_await self->client->lease_keepalive(self->id, self->client->failover_window(), period);
    if (self->stopped) break;
    if (left <= 0) {
      throw IoError(fmt::format(
          "etcd lease {:x} of node {} expired (etcd answered keep-alives too late): the "
          "other nodes count this node as lost",
          self->id, self->node));
    }
  }
}

void EtcdRendezvous::Lease::start() {
  auto self = shared_from_this();
  asio::co_spawn(tick.get_executor(), keep_alive(self),
                 [weak = std::weak_ptr<Lease>(self)](std::exception_ptr error) {
    const std::shared_ptr<Lease> self = weak.lock();
    if (!error || !self || self->stopped) return;
    log::get("rdzv")->error("etcd keep-alive failed: {}", error_text(error));
    self->error = error;
    if (self->on_lost) self->on_lost();
  });
}

void EtcdRendezvous::Lease::stop() {
  stopped = true;
  tick.cancel();
}

}  // namespace ddp::rdzv::etcd
