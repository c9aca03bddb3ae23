// The exit barrier. The arrivals are a tally, so the last member to arrive learns it from its own
// arrival and says so for all (the "passed" key): no member polls a count while every member is
// alive. A lost member never arrives; once the round's changes name lost members, each waiting
// member re-counts after every look, and the first to see arrivals plus losses reach the size
// passes the barrier for all.

#include "rendezvous/engine/exit_barrier.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fmt/format.h>

#include "common/log.hpp"

namespace ddp::rdzv {

using Clock = std::chrono::steady_clock;

asio::awaitable<void> pass_exit_barrier(Coordination& coordination, RoundMonitor& m,
                                        ExitBarrier barrier,
                                        std::function<std::exception_ptr()> other_error) {
  const auto logger = log::get("rdzv");
  m.finishing = true;
  std::int64_t done = co_await coordination.arrive(barrier.finished, barrier.node);
  std::int64_t lost = 0;
  for (;;) {
    if (m.stopped) co_return;  // the agent gave up on this barrier and moved on
    if (m.passed) break;
    if (m.error || (other_error && other_error())) {
      logger->warn("exit barrier abandoned: the round's store, watch or lease failed");
      co_return;
    }
    if (m.changes.closed && !m.changes.finished()) {
      logger->warn("exit barrier short-circuited: job closed: {}", *m.changes.closed);
      co_return;
    }
    lost = static_cast<std::int64_t>(m.changes.lost.size());
    if (done + lost >= barrier.size) {
      if (lost > 0) {
        logger->warn("exit barrier passed without lost node(s): {}",
                     fmt::format("{}", fmt::join(m.changes.lost, ", ")));
      }
      std::vector<std::pair<std::string, Bytes>> passed;
      passed.emplace_back(barrier.passed, to_bytes("1"));
      co_await coordination.put(std::move(passed));
      break;
    }
    co_await m.refresh(barrier.period);
    if (!m.changes.lost.empty() && !m.passed) {
      done = co_await coordination.count(barrier.finished);
    }
  }
  if (barrier.left.empty()) co_return;
  const std::int64_t left = co_await coordination.arrive(barrier.left, barrier.node);
  if (barrier.keeps_store && left < barrier.size - lost) {
    co_await wait_for_tally(coordination, barrier.left, barrier.size - lost,
                            barrier.close_timeout);
  }
}

asio::awaitable<void> wait_for_tally(Coordination& coordination, std::string tally,
                                     std::int64_t members, std::chrono::milliseconds timeout) {
  const Clock::time_point until = Clock::now() + timeout;
  asio::steady_timer tick(co_await asio::this_coro::executor);
  for (;;) {
    const std::int64_t arrived = co_await coordination.count(tally);
    if (arrived >= members || Clock::now() >= until) break;
    tick.expires_after(std::chrono::milliseconds(20));
    co_await tick.async_wait(asio::use_awaitable);
  }
}

}  // namespace ddp::rdzv
