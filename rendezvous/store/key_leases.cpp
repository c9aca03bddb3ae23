// KeyLeases: one timer per lease whose hold wait dropped. The grace lets a client whose
// connection was closed by its own timeout re-park the wait on a new connection without being
// declared gone; a holder that waits in bounded chunks re-parks within a round trip. The lease
// document is read again at expiry, so a holder that rewrote it meanwhile is honoured.

#include "rendezvous/store/key_leases.hpp"

#include <boost/asio/steady_timer.hpp>
#include <fmt/format.h>

#include <string>
#include <unordered_map>

#include "common/log.hpp"
#include "rendezvous/store/key_table.hpp"
#include "rendezvous/store/store_lease.hpp"

namespace ddp::rdzv {

using Clock = std::chrono::steady_clock;

struct KeyLeases::State : std::enable_shared_from_this<KeyLeases::State> {
  State(boost::asio::any_io_executor ex, KeyTable& t) : executor(std::move(ex)), table(&t) {}

  void dropped(const std::vector<std::string>& keys) {
    for (const std::string& key : keys) {
      const auto base = lease_base_of(key);
      if (!base || table->has_waiters(key) || pending.contains(key)) continue;
      const Bytes* doc = table->find(lease_key(*base));
      if (doc == nullptr) continue;  // nothing to do for this holder (yet)
      const auto lease = decode_lease(*doc);
      if (!lease) {
        log::get("store")->warn("ignoring lease {}: not a lease document", lease_key(*base));
        continue;
      }
      start(key, *base, lease->grace);
    }
  }

  void start(const std::string& hold_key, const std::string& base,
             std::chrono::milliseconds grace) {
    auto timer = std::make_shared<boost::asio::steady_timer>(executor, grace);
    pending.emplace(hold_key, timer);
    const Clock::time_point dropped_at = Clock::now();
    timer->async_wait([weak = weak_from_this(), hold_key, base, dropped_at](
                          boost::system::error_code ec) {
      const auto self = weak.lock();
      if (!self || ec) return;
      self->pending.erase(hold_key);
      self->expire(hold_key, base, dropped_at);
    });
  }

  void expire(const std::string& hold_key, const std::string& base, Clock::time_point dropped_at) {
    if (table->has_waiters(hold_key)) return;  // re-parked in time: the holder is alive
    const Bytes* doc = table->find(lease_key(base));
    if (doc == nullptr) return;
    const auto lease = decode_lease(*doc);
    if (!lease) return;
    const auto after = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() -
                                                                             dropped_at);
    log::get("store")->info("lease {} expired: its holder's wait was gone for {} ms", base,
                            after.count());
    // Deleted first: a wait that an append wakes might rewrite the lease, which must stand.
    table->erase(lease_key(base));
    table->append(lease->append_key, expired_value(*lease, after));
  }

  boost::asio::any_io_executor executor;
  KeyTable* table;
  std::unordered_map<std::string, std::shared_ptr<boost::asio::steady_timer>> pending;
};

KeyLeases::KeyLeases(boost::asio::any_io_executor executor, KeyTable& table)
    : state_(std::make_shared<State>(std::move(executor), table)) {
  table.set_drop_observer(
      [weak = std::weak_ptr<State>(state_)](const std::vector<std::string>& keys) {
        if (const auto state = weak.lock()) state->dropped(keys);
      });
}

// The state dies with this (timers and the observer hold it weakly), and its timers with it:
// a destroyed timer's wait completes as cancelled.
KeyLeases::~KeyLeases() { state_->table->set_drop_observer(nullptr); }

}  // namespace ddp::rdzv
