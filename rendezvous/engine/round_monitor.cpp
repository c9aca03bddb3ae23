// The shared half of a running round's monitor. Each waiter re-reads the state after every wake:
// the signal is a cancelled timer, so several wakes before a waiter runs collapse into one.

#include "rendezvous/engine/round_monitor.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/detached_error.hpp"
#include "common/log.hpp"
#include "ddp/error.hpp"

namespace ddp::rdzv {

using Clock = std::chrono::steady_clock;
using namespace boost::asio::experimental::awaitable_operators;

namespace {

RoundEvent abandoned_watch() { return {RoundChange::kPeerFailed, "watch abandoned"}; }

}  // namespace

RoundMonitor::RoundMonitor(asio::any_io_executor executor) : signal(std::move(executor)) {
  signal.expires_at(Clock::time_point::max());
}

void RoundMonitor::part_ended(std::exception_ptr failure, const char* backend) {
  if (failure && !stopped) {
    log::get("rdzv")->error("{} round {} monitor failed: {}", backend, round, error_text(failure));
    error = failure;
  }
  wake();
}

asio::awaitable<void> RoundMonitor::refresh(std::chrono::milliseconds period) {
  asio::steady_timer timeout(signal.get_executor(), period);
  co_await (wait_signal(signal) || timeout.async_wait(asio::as_tuple(asio::use_awaitable)));
}

asio::awaitable<bool> wait_signal(asio::steady_timer& timer) {
  boost::system::error_code ec;
  co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  const auto state = co_await asio::this_coro::cancellation_state;
  co_return state.cancelled() == asio::cancellation_type::none;
}

asio::awaitable<RoundEvent> watch_running_round(std::shared_ptr<RoundMonitor> m,
                                                std::function<std::exception_ptr()> other_error) {
  while (m && !m->stopped) {
    if (m->error) std::rethrow_exception(m->error);
    if (other_error) {
      if (const std::exception_ptr error = other_error()) std::rethrow_exception(error);
    }
    if (const auto event = m->event()) co_return *event;
    const bool woken = co_await wait_signal(m->signal);  // (not in the if: coawait_conditions.py)
    if (!woken) co_return abandoned_watch();
  }
  // Not in a running round, or this node itself left it (the exit barrier passed, or the agent
  // moved on to the next round): nothing can change it any more. Wait until cancelled; the
  // agent's race ends through its other branch.
  asio::steady_timer forever(co_await asio::this_coro::executor, Clock::time_point::max());
  const bool woken = co_await wait_signal(forever);
  if (woken) throw InternalError("watch_round woke without a round");
  co_return abandoned_watch();
}

}  // namespace ddp::rdzv
