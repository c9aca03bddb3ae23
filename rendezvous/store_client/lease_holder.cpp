// The holding coroutine. A failed wait (a reset connection, a call timeout) is retried after a
// short pause: TcpStoreClient reconnects on the next call, and the server counts the new wait
// as the same lease if it arrives within the grace. A wait that wakes because the hold key was
// set is a roll call (store_roll_call.hpp): the holder reads and deletes its bell, answers, and
// parks again, four requests in all; a wait woken by a set is no drop, so no grace runs.

#include "rendezvous/store_client/lease_holder.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/log.hpp"
#include "rendezvous/store/store_lease.hpp"
#include "rendezvous/store/store_roll_call.hpp"

namespace ddp::rdzv {

namespace {

asio::awaitable<void> hold(asio::any_io_executor executor, Store& store, std::string base,
                           std::chrono::milliseconds park, std::shared_ptr<bool> stopped) {
  const std::string hold_key = lease_hold_key(base);
  std::vector<std::string> keys(1, hold_key);
  asio::steady_timer pause(executor);
  std::string answered;  // the roll call generation answered last
  while (!*stopped) {
    try {
      const bool rung = co_await store.wait_for(keys, park);
      if (!rung || *stopped) continue;
      const Bytes bell = co_await store.get(hold_key);
      co_await store.delete_key(hold_key);
      answered = co_await answer_roll_call(store, bell, answered);
      log::get("rdzv")->debug("lease {}: answered roll call {}", base, answered);
      continue;
    } catch (const std::exception& e) {
      if (*stopped) co_return;
      log::get("rdzv")->debug("lease {}: wait failed ({}); parking it again", base, e.what());
    }
    pause.expires_after(std::chrono::milliseconds(50));
    boost::system::error_code ec;
    co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

}  // namespace

LeaseHolder::LeaseHolder(asio::any_io_executor executor, Store& store, std::string base,
                         std::chrono::milliseconds park)
    : stopped_(std::make_shared<bool>(false)) {
  asio::co_spawn(executor, hold(executor, store, std::move(base), park, stopped_),
                 [](std::exception_ptr) {});
}

LeaseHolder::~LeaseHolder() { stop(); }

void LeaseHolder::stop() { *stopped_ = true; }

}  // namespace ddp::rdzv
