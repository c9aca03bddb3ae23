#pragma once
// C10dRendezvous: the elastic rendezvous protocol (--rdzv_backend=c10d) over any Store. Rounds
// close at max_nodes at once, at the size the previous round's changes predict at once, or at
// min_nodes after the last call; the store host gets group rank 0. After a loss the survivors
// derive the next round from the last through a small plan instead of re-joining
// (c10d_reform.cpp, engine/round_plan.hpp). While a round runs, a background monitor
// heartbeats, some members read a
// group's heartbeats (each member is read by one other: linear cost), and every member keeps a
// WAIT parked on the round's change log (which exists only once something happened) or, in a
// large round, on the next round's plan. Runs on one io_context thread; the stores must outlive
// it. The backend that owns the store server or client is C10dBackend (c10d_backend.hpp).

#include <boost/asio/any_io_executor.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "rendezvous/c10d/c10d_assignment.hpp"
#include "rendezvous/c10d/c10d_settings.hpp"
#include "rendezvous/engine/round_changes.hpp"
#include "rendezvous/engine/round_plan.hpp"
#include "rendezvous/rendezvous.hpp"
#include "rendezvous/store/prefix_store.hpp"

namespace ddp::rdzv {

// Hosts only: opens a fresh store for the workers of `round` and returns where they reach it
// (MASTER_ADDR, MASTER_PORT). A fresh store per round keeps rounds that spend no restart (and so
// share TORCHELASTIC_RESTART_COUNT) from reading each other's worker keys.
using WorkerStoreOpener = std::function<std::pair<std::string, std::uint16_t>(int round)>;

class C10dRendezvous final : public Rendezvous {
 public:
  // `store` is the un-prefixed rendezvous store; keys go under /ddprun/<run_id>/.
  C10dRendezvous(asio::any_io_executor executor, Store& store, C10dSettings settings,
                 C10dNode self, WorkerStoreOpener open_worker_store = {});
  ~C10dRendezvous() override;

  asio::awaitable<RendezvousInfo> next_round(int local_world_size) override;
  asio::awaitable<RoundEvent> watch_round() override;
  asio::awaitable<int> report_failure(std::string what) override;
  asio::awaitable<std::optional<RoundEvent>> failure_verdict(
      std::chrono::steady_clock::time_point failed_at) override;
  asio::awaitable<void> finish(bool success) override;

  const C10dNode& self() const { return self_; }

  // Parks the wait on each round's change log on `store` (the same store as the one given to the
  // constructor, over a connection that serves nothing else) for the whole round. Without it the
  // wait goes to the constructor's store and is re-parked every c10d_read_period (at most 1 s), so
  // that a single client connection is never held longer than that. REQUIRES: before next_round.
  void watch_changes_on(Store& store);

 private:
  struct Joined {  // this node's place in a round it joined
    int round = 0;
    int index = 0;  // join index
    int size = 0;   // members of the closed round
  };
  struct Member {  // this node in the closed round it runs in
    C10dRoundHeader header;
    C10dPlace place;
    std::optional<DerivedRound> derived;  // the plan, when header.derived
  };
  struct Monitor;  // the running round's heartbeat and change watcher (c10d_monitor.cpp)

  // The last round that closed; nullopt in a fresh job (no round closed yet).
  asio::awaitable<std::optional<int>> latest_round();
  asio::awaitable<int> expected_members(int round);
  asio::awaitable<Joined> join(int round, int local_world_size, int expected);
  struct Forming;  // this node's side of forming a joined round (engine/round_forming.hpp)
  asio::awaitable<C10dRoundHeader> wait_closed(const Joined& joined, int expected,
                                               std::chrono::steady_clock::time_point deadline);
  // What the monitor learnt of the running round: its change log as last read, and the plan of
  // the next round when it read or wrote one.
  struct Seen {
    RoundChanges changes;
    std::optional<Bytes> plan;
  };
  // Re-forming from the plan in r<N+1>/size (c10d_reform.cpp): this node's place in the derived
  // round, or nullopt when every node joins round N+1 in full.
  asio::awaitable<std::optional<RendezvousInfo>> reform(int local_world_size, Seen seen);
  asio::awaitable<Bytes> plan_of(int round, const RoundChanges& seen);
  // The proposal of round prev.round + 1's plan (engine/round_plan.hpp) this node would make.
  PlanProposal plan_proposal(const C10dRoundHeader& prev) const;
  // compare_set of r<round>/size from absent (or from a join plan, which a closer replaces);
  // returns the value stored.
  asio::awaitable<Bytes> claim_size(int round, Bytes desired);
  // This node's store lease for `round` (key, document); nullopt for the store host.
  std::optional<std::pair<std::string, Bytes>> lease_entry(int round) const;
  asio::awaitable<void> close_round(int round, int size);
  asio::awaitable<void> publish_assignment(int round, int size);
  asio::awaitable<void> write_lease(int round);
  asio::awaitable<void> throw_if_closed();

  // `beaten`: this node's heartbeat key holds its first beat already (a derived round).
  void start_monitor(const Member& member, bool beaten = false);
  void stop_monitor();
  // What the monitor of the running round learnt (nothing without a monitor).
  Seen seen() const;
  // This node spent a restart in the running round: its monitor proposes no derived plan.
  void forbid_derived_plan();
  // False when the agent gave up on the barrier and moved on (the monitor stopped meanwhile).
  asio::awaitable<bool> exit_barrier();
  asio::awaitable<void> wait_until_read(int round);
  asio::awaitable<void> close_job(const std::string& why);

  asio::any_io_executor executor_;
  PrefixStore store_;
  C10dSettings settings_;
  C10dNode self_;
  WorkerStoreOpener open_worker_store_;
  std::optional<Member> current_;  // the round this node runs in
  int current_index_ = 0;
  std::optional<std::string> failure_;    // what report_failure was told last
  int failed_round_ = -1;                 // the round report_failure was last called in
  int local_world_size_ = 1;              // as given to next_round
  Bytes derived_desc_;  // this node's descriptor in a derived round (the same every round)
  std::shared_ptr<Monitor> monitor_;
  std::optional<PrefixStore> watch_store_;  // watch_changes_on
};

}  // namespace ddp::rdzv
