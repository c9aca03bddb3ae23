// Proposing a round's plan. The checks that forbid deriving cost one request each and run only
// when the changes would allow a derived round: a plain loss.

#include "rendezvous/engine/round_plan.hpp"

#include <algorithm>

namespace ddp::rdzv {

asio::awaitable<Bytes> propose_plan(Coordination& coordination, PlanProposal proposal,
                                    RoundChanges changes) {
  std::optional<DerivedRound> derived;
  if (proposal.may_derive) derived = derivable(proposal.prev, changes, proposal.min_nodes);
  for (const std::string& tally : proposal.full_join_if_any) {
    if (!derived) break;
    const std::int64_t joined = co_await coordination.count(tally);
    if (joined > 0) derived.reset();
  }
  if (!derived) co_return co_await coordination.create(proposal.key, join_plan(proposal.name));
  if (proposal.open_worker_store) {
    std::tie(derived->master_addr, derived->master_port) = proposal.open_worker_store();
  }
  const int size = proposal.prev.size - static_cast<int>(derived->lost.size());
  co_return co_await coordination.create(proposal.key,
                                         encode_plan(size, proposal.name, *derived));
}

asio::awaitable<Bytes> await_plan(Coordination& coordination, std::string key, std::string name,
                                  std::chrono::milliseconds timeout, HostAlive host_alive,
                                  std::chrono::milliseconds poll) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + timeout;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) break;
    const bool stored =
        co_await coordination.wait_for(key, host_alive ? std::min(poll, left) : left);
    if (stored) {
      std::vector<std::string> one(1, key);
      auto values = co_await coordination.get(std::move(one));
      if (values.at(0)) co_return std::move(*values[0]);
    }
    if (!host_alive) continue;
    const bool alive = co_await host_alive();
    if (!alive) break;
  }
  co_return co_await coordination.create(std::move(key), join_plan(name));
}

}  // namespace ddp::rdzv
