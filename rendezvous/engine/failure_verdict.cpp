// The failure verdict's wait. A dead node's loss reaches the round's changes within the
// backend's detection time (c10d: its store connection's grace; etcd: its link's grace, else its
// lease's TTL), and the workers of its peers usually fail before that: so a failure waits, up
// to that time plus a margin, for a loss that explains it. Only a failure with every node alive
// waits it out, unless a roll call shows every member alive sooner.

#include "rendezvous/engine/failure_verdict.hpp"

#include <algorithm>

namespace ddp::rdzv {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

asio::awaitable<std::optional<RoundEvent>> judge_failure(RoundMonitor& m, Clock::time_point until,
                                                         milliseconds poll) {
  co_await m.refresh(milliseconds(0));
  for (;;) {
    if (auto cause = m.changes.failure_cause()) co_return cause;
    const Clock::time_point now = Clock::now();
    if (m.all_present || m.stopped || m.error || now >= until) co_return std::nullopt;
    co_await m.refresh(std::min(poll, std::chrono::duration_cast<milliseconds>(until - now) +
                                          milliseconds(1)));
  }
}

}  // namespace ddp::rdzv
