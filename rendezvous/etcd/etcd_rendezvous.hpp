#pragma once
// EtcdRendezvous: the elastic rendezvous (--rdzv_backend=etcd) over an etcd v3 cluster, with the
// c10d backend's semantics (MIN:MAX, scale-up, node loss without spending a restart, a job-wide
// restart budget, run-id isolation, the exit barrier) and no single point of failure: every node
// is an equal client of etcd, and the workers' store is hosted by each round's group rank 0.
//
// Liveness is a lease per agent, kept alive every TTL/3; a node's join keys are bound to it, so
// a node is lost when etcd expires its lease (or the agent revokes it on the way out). A dead
// agent is found sooner by its closed link to the round's host (etcd_links.hpp), which then
// deletes its join key at once. After a loss the survivors derive the next round from the last
// through a small plan instead of re-joining (etcd_reform.cpp). Waiting is watching: a joining
// node watches its round's assignment key, a member watches its round's prefix. A round closes
// in one compare-and-swap transaction (create-if-absent of the header). Runs on one io_context
// thread; the client must outlive it.

#include <boost/asio/any_io_executor.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "rendezvous/etcd/etcd_kv.hpp"
#include "rendezvous/etcd/etcd_documents.hpp"
#include "rendezvous/etcd/etcd_links.hpp"
#include "rendezvous/etcd/etcd_settings.hpp"
#include "rendezvous/rendezvous.hpp"

namespace ddp::rdzv::etcd {

// Opens a fresh store for the workers of `round` on this node and returns where they reach it
// (MASTER_ADDR, MASTER_PORT). Every node opens one when it joins; the round uses group rank 0's.
using WorkerStoreOpener = std::function<std::pair<std::string, std::uint16_t>(int round)>;

class EtcdRendezvous final : public Rendezvous {
 public:
  // `links`: this agent's link store (self.link_port serves it), whose leases tell this node of
  // a member's death while it hosts a round (etcd_links.hpp); null: no loss by connection.
  EtcdRendezvous(asio::any_io_executor executor, std::shared_ptr<EtcdKv> client,
                 EtcdSettings settings, EtcdNode self, WorkerStoreOpener open_worker_store,
                 MemoryStore* links = nullptr);
  ~EtcdRendezvous() override;

  asio::awaitable<RendezvousInfo> next_round(int local_world_size) override;
  asio::awaitable<RoundEvent> watch_round() override;
  asio::awaitable<int> report_failure(std::string what) override;
  // Waits up to a lease TTL plus the margin after `failed_at` for a member's lease to expire
  // (a SIGKILLed node's keys outlive it by up to a TTL), returning early on a loss or on another
  // node's failure; nullopt when every member's keys are still there at the end.
  asio::awaitable<std::optional<RoundEvent>> failure_verdict(Clock::time_point failed_at) override;
  asio::awaitable<void> finish(bool success) override;

  // Revokes this node's lease (its keys go at once, so the others see it leave) and stops the
  // keep-alives. Idempotent; errors are logged, not thrown.
  asio::awaitable<void> leave();
  // Stops the keep-alives and forgets the lease without revoking it (etcd expires it a TTL
  // later): how a node leaves a job that finished. Idempotent.
  void release();
  // The lease this node holds (0 before the first round or after leave() or release()).
  std::int64_t lease_id() const;
  // Why this node's lease is lost (the keep-alive's error; null while it holds), as the round's
  // watch and exit barrier check it; empty before the node has a lease.
  std::function<std::exception_ptr()> lease_error() const;
  // The round whose join keys hold the running round's member records (the round before, for a
  // round derived from it: its members wrote their records there and did not join again).
  int records_round() const;

 private:
  struct Lease;    // the lease and its keep-alive coroutine
  struct Monitor;  // the running round's watch (etcd_monitor.cpp)
  struct Joined {
    int round = 0;
    std::int64_t revision = 0;          // create revision of this node's join key
    int index = 0;                      // arrivals up to and including this node when it joined
    std::optional<std::string> header;  // the round's header, when it closed before the join
    int latest = 0;                     // the job's last closed round at the join
  };
  struct Member {
    RoundHeader header;
    int group_rank = 0;
    // A derived round's: the round it came from and the plan (its members' records there speak
    // for a member that died before it put its record in this round).
    std::optional<RoundHeader> before;
    std::optional<DerivedRound> plan;
  };

  asio::awaitable<void> ensure_lease();
  asio::awaitable<int> expected_members(int round);
  // The round's join keys alive now, read with the job's closed key in one request, and with
  // `with_previous` those of round - 1 too (whose live members the round expects; else 0):
  // {arrived, still alive in the round before}. Throws RendezvousClosedError when the job is
  // closed.
  asio::awaitable<std::pair<std::int64_t, std::int64_t>> live_joins(int round,
                                                                    bool with_previous = false);
  asio::awaitable<Joined> join(int round, int local_world_size);
  struct Forming;  // this node's side of forming a joined round (engine/round_forming.hpp)
  asio::awaitable<RoundHeader> wait_closed(const Joined& joined, int expected,
                                           Clock::time_point deadline);
  asio::awaitable<void> close_round(int round, int size);
  // The compare under which a closer writes round N's assignment key: absent, or the join plan
  // that stands there (a closer replaces it).
  static Compare claim_compare(const std::string& key,
                               const std::optional<std::string>& join_plan_there);
  // Re-forming after a loss from the plan in r<N+1>/assignment (etcd_reform.cpp): this node's
  // place in the derived round, or nullopt when every node joins round N+1 in full.
  asio::awaitable<std::optional<RendezvousInfo>> reform(RoundChanges seen);
  // The host of a round derived from `prev`: until every member of the plan has put its record
  // (at most a lease TTL), asks the link stores of those that have not, and declares lost one
  // whose agent is gone (etcd_absentees.hpp), so that its lease need not expire first.
  void find_dead_in_plan(const RoundHeader& prev);
  // How this node takes part in proposing round N+1's plan (engine/round_plan.hpp).
  asio::awaitable<Bytes> plan_of(const RoundHeader& prev, const RoundChanges& seen);
  // The header in `value`; throws RendezvousClosedError when the job's end closed the round.
  RoundHeader header_or_closed(const std::string& value, int round);
  // Keys under `prefix` (at `revision`; 0: now).
  asio::awaitable<std::int64_t> count(const std::string& prefix, std::int64_t revision = 0);
  asio::awaitable<void> throw_if_closed();
  void throw_closed(const RangeResponse& closed);  // when it holds the closed key
  // Releases the lease (the job is over) and throws RendezvousClosedError(message).
  [[noreturn]] void job_closed(const std::string& message);
  asio::awaitable<void> close_job(const std::string& why);

  void start_monitor(const Member& member);
  // A derived round's second watch: a DELETE of a member's record in the round it came from.
  void watch_records_before(const Member& member);
  void stop_monitor();
  // What the monitor of the running round saw change (nothing without a monitor).
  RoundChanges seen() const;
  // The round's links (etcd_links.hpp): the host watches its members', a member holds its own.
  asio::awaitable<void> start_link(Member member);
  asio::awaitable<void> exit_barrier();

  asio::any_io_executor executor_;
  std::shared_ptr<EtcdKv> client_;
  EtcdSettings settings_;
  EtcdNode self_;
  WorkerStoreOpener open_worker_store_;
  std::string job_;  // /ddprun/<run_id>/
  std::shared_ptr<Lease> lease_;
  std::optional<Member> current_;
  std::optional<RoundHeader> previous_;  // the round left for the one forming (next_round)
  std::optional<std::string> failure_;
  int failed_round_ = -1;     // the round report_failure was last called in
  int local_world_size_ = 1;  // as given to next_round
  NodeDesc desc_;             // this node's record at its last join
  std::vector<std::string> lost_;  // the nodes the round this node last ran in lost
  std::shared_ptr<Monitor> monitor_;
  MemoryStore* links_ = nullptr;
  std::unique_ptr<RoundLink> link_;  // the running round's
};

}  // namespace ddp::rdzv::etcd
