// Joining and closing etcd rounds. A node's join is one transaction: it puts its descriptor
// (bound to its lease) and, in the same revision, counts the round's join keys (its arrival
// index) and reads the round's header and the job's closed key; it then watches the round's
// assignment key. The node whose index reaches max_nodes or the expected size, or whose last-call
// timer fires, reads the first `size` join keys in create order and writes the header in one
// transaction that succeeds only if no header exists yet. Each member finds its place in the
// header: O(1) requests and bytes per node (a lease grant, the join, a watch), and one
// O(size) read by the closer.
#include "rendezvous/etcd/etcd_rendezvous.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "common/parse_number.hpp"
#include "ddp/error.hpp"
#include "rendezvous/engine/derived_round.hpp"
#include "rendezvous/engine/rdzv_log.hpp"
#include "rendezvous/engine/round_forming.hpp"
#include "rendezvous/etcd/etcd_absentees.hpp"
#include "rendezvous/etcd/etcd_keys.hpp"
#include "rendezvous/etcd/etcd_lease.hpp"

namespace ddp::rdzv::etcd {

using std::chrono::milliseconds;

EtcdRendezvous::EtcdRendezvous(asio::any_io_executor executor, std::shared_ptr<EtcdKv> client,
                               EtcdSettings settings, EtcdNode self,
                               WorkerStoreOpener open_worker_store, MemoryStore* links)
    : executor_(std::move(executor)),
      client_(std::move(client)),
      settings_(std::move(settings)),
      self_(std::move(self)),
      open_worker_store_(std::move(open_worker_store)),
      job_(keys::job(settings_.run_id)),
      links_(links) {}

EtcdRendezvous::~EtcdRendezvous() {
  stop_monitor();
  if (lease_) lease_->stop();
}

std::int64_t EtcdRendezvous::lease_id() const { return lease_ ? lease_->id : 0; }

asio::awaitable<void> EtcdRendezvous::ensure_lease() {
  if (lease_) co_return;
  const LeaseGrant grant = co_await client_->lease_grant(settings_.lease_ttl.count());
  lease_ = std::make_shared<Lease>(executor_, client_, grant, self_.name);
  lease_->start();
  logger()->info("etcd rendezvous run={}: node {} holds lease {:x} (ttl {} s) via etcd member {}",
                 settings_.run_id, self_.name, grant.id, grant.ttl,
                 client_->endpoint());
}

asio::awaitable<std::int64_t> EtcdRendezvous::count(const std::string& prefix,
                                                    std::int64_t revision) {
  RangeRequest r = prefix_count(prefix);
  r.revision = revision;
  co_return (co_await client_->range(std::move(r))).count;
}

asio::awaitable<RendezvousInfo> EtcdRendezvous::next_round(int local_world_size) {
  RoundChanges seen = this->seen();
  lost_ = seen.lost;  // (named when too few are left)
  stop_monitor();
  co_await ensure_lease();
  // After a loss the survivors derive the next round from this one (etcd_reform.cpp); the plan
  // may send everyone through a full join instead.
  if (current_ && !seen.lost.empty() && local_world_size == local_world_size_) {
    auto info = co_await reform(std::move(seen));
    if (info) co_return *info;
  }
  local_world_size_ = local_world_size;
  const Clock::time_point deadline = Clock::now() + settings_.join_timeout;
  // A node's first round is 0 unless the job already runs: the join reads the last closed
  // round too, and a node that finds a later one joins there instead (its key in round 0 stays
  // behind, harmless, until its lease ends). One request fewer than reading first.
  int round = 0;
  int expected = 0;
  bool first = !current_;
  previous_.reset();
  if (current_) {
    previous_ = current_->header;
    round = current_->header.round + 1;
    expected = co_await expected_members(current_->header.round);
  }
  current_.reset();
  for (;;) {
    const Joined joined = co_await join(round, local_world_size);
    if (first && joined.latest > round) {
      logger()->debug("run {} is at round {}: joining it", settings_.run_id, joined.latest);
      round = joined.latest;
      first = false;
      continue;
    }
    first = false;
    const RoundHeader header = co_await wait_closed(joined, expected, deadline);
    if (const auto group_rank = group_rank_of(header, joined.revision)) {
      current_ = Member{header, *group_rank, std::nullopt, std::nullopt};
      break;
    }
    // Late: the round closed without us. Running members restart for us when there is room;
    // a full round only learns, from our join key, that the next round should expect us.
    if (header.size < settings_.max_nodes) {
      PutRequest waiting{keys::waiting(job_, round, self_.name), "1", lease_->id};
      co_await client_->put(std::move(waiting));
    }
    log_late_join(settings_.run_id, round, header.size, settings_.max_nodes);
    lost_.clear();  // (this node did not run in `round`)
    expected = co_await expected_members(round);
    ++round;
  }
  RendezvousInfo info = info_for(current_->header, current_->group_rank, settings_.run_id);
  log_round_closed(info);
  start_monitor(*current_);
  co_await start_link(*current_);
  co_return info;
}

asio::awaitable<std::pair<std::int64_t, std::int64_t>> EtcdRendezvous::live_joins(
    int round, bool with_previous) {
  TxnRequest read;
  read.success_reads.push_back(prefix_count(keys::joins(job_, round)));
  read.success_reads.push_back(one_key(keys::closed(job_)));
  if (with_previous) read.success_reads.push_back(prefix_count(keys::joins(job_, round - 1)));
  const TxnResponse state =
      co_await client_->txn(std::move(read), "count " + keys::joins(job_, round));
  if (state.ranges.size() != (with_previous ? 3u : 2u)) {
    throw IoError("etcd txn(count joins): short response");
  }
  throw_closed(state.ranges[1]);
  co_return std::pair{state.ranges[0].count, with_previous ? state.ranges[2].count : 0};
}

asio::awaitable<int> EtcdRendezvous::expected_members(int round) {
  // The live join keys of the round just left: its members still alive (a lost node's key went
  // with its lease) plus the nodes that arrived late. A node that spent the last restart closes
  // the job (with its failure) before it leaves, so its key is gone only after the reason is
  // there: the same read reports that reason rather than the count.
  const std::int64_t live = (co_await live_joins(round)).first;
  const int expected = static_cast<int>(std::min<std::int64_t>(live, settings_.max_nodes));
  if (expected < settings_.min_nodes) {
    const std::string why = too_few_left(lost_, expected, settings_.min_nodes, round);
    co_await close_job(why);
    job_closed(fmt::format("etcd rendezvous run={} is closed: {}", settings_.run_id, why));
  }
  co_return expected;
}

asio::awaitable<EtcdRendezvous::Joined> EtcdRendezvous::join(int round, int local_world_size) {
  NodeDesc desc{self_.name, self_.addr, local_world_size, {}, 0, self_.addresses, self_.link_port};
  desc.rank_hint = self_.rank_hint;
  desc_ = desc;  // (a derived round's record: without this round's worker store)
  if (open_worker_store_) std::tie(desc.master_addr, desc.master_port) = open_worker_store_(round);
  // One transaction: the put, then (seeing it, at its revision) the keys alive up to us, which
  // are our arrival index, the header if the round closed before us, and the job's closed key.
  TxnRequest txn;
  txn.success.push_back({keys::join(job_, round, self_.name), encode(desc), lease_->id});
  txn.success_reads.push_back(prefix_count(keys::joins(job_, round)));
  txn.success_reads.push_back(one_key(keys::assignment(job_, round)));
  txn.success_reads.push_back(one_key(keys::closed(job_)));
  txn.success_reads.push_back(one_key(keys::latest(job_)));
  const TxnResponse result =
      co_await client_->txn(std::move(txn), "join " + keys::join(job_, round, self_.name));
  if (!result.succeeded || result.ranges.size() != 4) {
    throw IoError(fmt::format("etcd txn(join round {}): unexpected response", round));
  }
  Joined joined;
  throw_closed(result.ranges[2]);
  if (const auto& latest = result.ranges[3].kvs; !latest.empty()) {
    joined.latest = parse_leading_number<int>(latest[0].value).value_or(0);
  }
  joined.round = round;
  joined.revision = result.revision;
  joined.index = static_cast<int>(result.ranges[0].count);
  // (A join plan only says that the round is joined in full: it is not closed.)
  if (!result.ranges[1].kvs.empty() && !is_join_plan(to_bytes(result.ranges[1].kvs[0].value))) {
    joined.header = result.ranges[1].kvs[0].value;
  }
  logger()->debug("joined round={} arrival={} revision={} node={} addr={}", round, joined.index,
                  joined.revision, self_.name, self_.addr);
  co_return joined;
}

// etcd's side of forming a round (engine/round_forming.hpp): one watch on the round's
// assignment key for the whole wait, from just after this node's join, so that a header written
// at any later revision reaches it; a count is one transaction that counts the round's join keys
// and reads the job's closed key (a re-count counts the round before's too, and where members are
// missing, asks their link stores: declare_dead_absentees); the close is close_round's read and
// transaction; the names of the joined are one read.
struct EtcdRendezvous::Forming final : FormingRound {
  Forming(EtcdRendezvous& rendezvous, const Joined& joined)
      : rdzv(rendezvous),
        round(joined.round),
        watch(rdzv.client_->watch(keys::assignment(rdzv.job_, round), "", joined.revision + 1,
                                  false)) {}
  ~Forming() override { watch->cancel(); }

  asio::awaitable<bool> wait_closed(Clock::time_point until) override {
    // (A join plan only says that the round is joined in full: it is not closed.)
    while (!value) {
      const auto response = co_await watch->next(until);
      if (!response) co_return false;
      for (const WatchEvent& event : response->events) {
        if (!event.is_delete && !is_join_plan(to_bytes(event.kv.value))) value = event.kv.value;
      }
    }
    co_return true;
  }
  // A member of the round before that died just as it ended (two nodes lost at once: the first
  // loss ends the round, the second is seen after the survivors counted it) never joins. Its join
  // key there goes with its lease, at most a TTL later, or sooner where its agent's link store
  // refuses connections: while the round expects members, every count re-counts.
  bool recounts(int expected, int) const override { return expected > 0; }
  asio::awaitable<Arrivals> count(int expected) override {
    Arrivals arrivals;
    if (!recounts(expected, 0)) {
      arrivals.arrived = static_cast<int>((co_await rdzv.live_joins(round)).first);
      co_return arrivals;
    }
    auto [arrived, alive] = co_await rdzv.live_joins(round, true);
    if (arrived < alive && rdzv.previous_ && rdzv.previous_->round == round - 1) {
      const Absentees found = co_await declare_dead_absentees(
          rdzv.client_, rdzv.job_, *rdzv.previous_, rdzv.settings_.connection_grace);
      if (found.declared > 0) std::tie(arrived, alive) = co_await rdzv.live_joins(round, true);
    }
    arrivals.arrived = static_cast<int>(arrived);
    arrivals.alive = static_cast<int>(std::min<std::int64_t>(alive, rdzv.settings_.max_nodes));
    co_return arrivals;
  }
  asio::awaitable<void> close(int size) override { return rdzv.close_round(round, size); }
  asio::awaitable<void> throw_if_closed() override { co_return; }  // (each count read it)
  asio::awaitable<std::vector<std::string>> joined_names(int count) override {
    const std::string joins = keys::joins(rdzv.job_, round);
    RangeRequest first;
    first.key = joins;
    first.range_end = prefix_end(joins);
    first.limit = count;
    first.sort_by_create = true;
    std::vector<std::string> names;
    const RangeResponse joined = co_await rdzv.client_->range(std::move(first));
    for (const KeyValue& kv : joined.kvs) names.push_back(kv.key.substr(joins.size()));
    co_return names;
  }

  EtcdRendezvous& rdzv;
  int round = 0;
  std::shared_ptr<KvWatch> watch;
  std::optional<std::string> value;  // the assignment key's, once wait_closed returned true
};

asio::awaitable<RoundHeader> EtcdRendezvous::wait_closed(const Joined& joined, int expected,
                                                         Clock::time_point deadline) {
  // A header written before our join (we are late) came back with the join.
  if (joined.header) co_return header_or_closed(*joined.header, joined.round);
  const FormingRules rules{
      .backend = "etcd",
      .round = joined.round,
      // A large round stretches the period so that its nodes' counts together stay near 100 a
      // second: every 10 s at 1,024 nodes. The close does not wait for them: the header comes on
      // the watch.
      .progress_period =
          std::max(settings_.progress_interval, milliseconds(10) * settings_.max_nodes),
      // At most every half TTL, and as the counts do, about 100 a second across the round.
      .recount_period =
          std::min(std::chrono::duration_cast<milliseconds>(settings_.lease_ttl) / 2,
                   std::max(milliseconds(250), milliseconds(10) * settings_.max_nodes))};
  Forming forming(*this, joined);  // (the watch first: then a close)
  co_await form_round(forming, settings_, rules, joined.index, expected, deadline);
  if (*forming.value == keys::kClosedRound) co_await throw_if_closed();  // with the job's reason
  co_return header_or_closed(*forming.value, joined.round);
}

RoundHeader EtcdRendezvous::header_or_closed(const std::string& value, int round) {
  if (value == keys::kClosedRound) {
    // The job's end wrote it, after the job's closed key (which carries the reason).
    job_closed(fmt::format("etcd rendezvous run={} round={} was closed", settings_.run_id, round));
  }
  // A round derived from the one before closed without joins: every arrival is late there.
  if (is_derived_plan(to_bytes(value))) return late_header(round, to_bytes(value));
  return decode_round_header(value, keys::assignment(job_, round));
}

asio::awaitable<void> EtcdRendezvous::close_round(int round, int size) {
  const std::string assignment_key = keys::assignment(job_, round);
  const std::string restarts_key = keys::restarts(job_);
  std::optional<std::string> join_plan_there;  // the closer replaces a join plan
  for (int attempt = 0; attempt < 8; ++attempt) {
    RangeRequest first;
    first.key = keys::joins(job_, round);
    first.range_end = prefix_end(first.key);
    first.limit = size;
    first.sort_by_create = true;
    TxnRequest read;  // the members and the restart count, in one revision
    read.success_reads.push_back(std::move(first));
    read.success_reads.push_back(one_key(restarts_key));
    const TxnResponse state = co_await client_->txn(std::move(read), "read " + assignment_key);
    if (state.ranges.size() != 2) throw IoError("etcd txn(read members): short response");
    const RangeResponse& members = state.ranges[0];
    const RangeResponse& restarts = state.ranges[1];
    if (static_cast<int>(members.kvs.size()) < settings_.min_nodes) co_return;  // some expired
    const std::int64_t restarts_mod = restarts.kvs.empty() ? 0 : restarts.kvs[0].mod_revision;
    const int restart_count =
        restarts.kvs.empty() ? 0 : failed_restart_count(restarts.kvs[0].value);
    const RoundHeader header =
        header_for(round, restart_count, state.revision, members.kvs, self_.name);
    TxnRequest txn;
    txn.compare.push_back(claim_compare(assignment_key, join_plan_there));
    // The restart count in the header is the one at the close: a failure reported meanwhile
    // makes the transaction fail, and we read again.
    txn.compare.push_back({restarts_key, Compare::Target::kMod, restarts_mod, {}});
    txn.success.push_back({assignment_key, encode(header), 0});
    txn.success.push_back({keys::latest(job_), std::to_string(round), 0});
    txn.failure.push_back(one_key(assignment_key));
    const TxnResponse result = co_await client_->txn(std::move(txn), "close " + assignment_key);
    if (result.succeeded) {
      logger()->debug("closed round={} size={} revision={}", round, header.size, header.revision);
      co_return;
    }
    if (!result.ranges.empty() && !result.ranges[0].kvs.empty()) {
      const std::string& there = result.ranges[0].kvs[0].value;
      if (!is_join_plan(to_bytes(there))) co_return;  // closed by another
      join_plan_there = there;
    }
  }
}

Compare EtcdRendezvous::claim_compare(const std::string& key,
                                      const std::optional<std::string>& join_plan_there) {
  if (join_plan_there) return Compare{key, Compare::Target::kValue, 0, *join_plan_there};
  return Compare{key, Compare::Target::kCreate, 0, {}};
}

asio::awaitable<void> EtcdRendezvous::throw_if_closed() {
  throw_closed(co_await client_->range(one_key(keys::closed(job_))));
}

void EtcdRendezvous::throw_closed(const RangeResponse& closed) {
  if (closed.kvs.empty()) return;
  job_closed(
      fmt::format("etcd rendezvous run={} is closed: {}", settings_.run_id, closed.kvs[0].value));
}

void EtcdRendezvous::job_closed(const std::string& message) {
  // Nobody needs to see this node leave a job that is over: release the lease rather than let
  // the agent revoke it on the way out. A thousand nodes leaving a failed job at once would
  // otherwise each wake every member still watching its round, as at a finished job's exit.
  release();
  throw RendezvousClosedError(message);
}

}  // namespace ddp::rdzv::etcd
