// Joining and closing c10d rounds. Every node makes the same few store requests per round, at any
// size (docs/rendezvous.md counts them: an add for its arrival index, one write of its descriptor
// and heartbeat keys, one wait, one read of the round's header and one of its own place) and
// reads O(1) bytes; the node whose compare_set closes the round reads the descriptors once and
// writes the places and the header. Nothing is read-modify-written by every node.

#include "rendezvous/c10d/c10d_rendezvous.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "common/parse_number.hpp"
#include "ddp/error.hpp"
#include "rendezvous/c10d/c10d_keys.hpp"
#include "rendezvous/engine/exit_barrier.hpp"
#include "rendezvous/engine/rdzv_log.hpp"
#include "rendezvous/engine/round_forming.hpp"
#include "rendezvous/engine/store_coordination.hpp"
#include "rendezvous/store/store_lease.hpp"

namespace ddp::rdzv {

namespace keys = c10d_keys;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

// Leading decimal integer of a value ("3 node_name" -> 3); nullopt when there is none.
std::optional<std::int64_t> leading_int(const Bytes& value) {
  return parse_leading_number<std::int64_t>(to_string(value));
}

// (Messages are built outside coroutines: GCC 12 miscompiles some format calls inside them.)
std::string closed_message(const std::string& run_id, const std::string& why) {
  return fmt::format("c10d rendezvous run={} is closed: {}", run_id, why);
}

// How many of a round's first arrivals re-count a re-forming round (wait_closed).
constexpr int kRecounters = 32;

}  // namespace

C10dRendezvous::C10dRendezvous(asio::any_io_executor executor, Store& store,
                               C10dSettings settings, C10dNode self,
                               WorkerStoreOpener open_worker_store)
    : executor_(std::move(executor)),
      store_(keys::prefix(settings.run_id), store),
      settings_(std::move(settings)),
      self_(std::move(self)),
      open_worker_store_(std::move(open_worker_store)) {}

C10dRendezvous::~C10dRendezvous() { stop_monitor(); }

asio::awaitable<RendezvousInfo> C10dRendezvous::next_round(int local_world_size) {
  Seen seen = this->seen();
  stop_monitor();
  if (local_world_size != local_world_size_) derived_desc_.clear();
  local_world_size_ = local_world_size;
  // After a loss the survivors derive the next round from this one (c10d_reform.cpp); the plan
  // says when every node joins the next round in full instead, as below.
  if (current_) {
    auto info = co_await reform(local_world_size, std::move(seen));
    if (info) co_return *info;
  }
  // A node's first call joins round 0 at once. In a fresh job that is the round to join; a job
  // that runs, or has closed (a job closes only after one of its rounds did), has closed round 0
  // already, so such a node finds itself late there and only then asks whether the job is
  // closed and which round is the last (below): one request less for every node of a fresh job.
  const bool first_call = !current_;
  bool closed = false;
  if (current_) closed = co_await store_.check(c10d_keys::one(keys::kClosed));
  if (closed) {
    // Tell a store host that is failing the job that we have read why, so it may exit.
    co_await store_.add(keys::left(current_->header.round), 1);
    const std::string why = to_string(co_await store_.get_existing(keys::kClosed));
    throw RendezvousClosedError(closed_message(settings_.run_id, why));
  }
  const Clock::time_point deadline = Clock::now() + settings_.join_timeout;
  int round = 0;
  int expected = 0;
  if (current_) {
    round = current_->header.round + 1;
    expected = co_await expected_members(current_->header.round);
  }
  current_.reset();
  Joined joined;
  C10dRoundHeader header;
  for (;;) {
    joined = co_await join(round, local_world_size, expected);
    header = co_await wait_closed(joined, expected, deadline);
    // The members are the arrivals 1..size; a derived round's members did not arrive.
    if (joined.index <= header.size && !header.derived) break;
    if (first_call && round == 0) {
      // Round 0 closed without this node: the job runs. Is it over, and which round is last?
      co_await throw_if_closed();
      const std::optional<int> latest = co_await latest_round();
      if (latest && *latest > round) {
        round = *latest;  // the rounds in between are over: no "waiting" line for them
        continue;
      }
    }
    // Late: the round closed without us. Running members restart for us when there is room
    // ("waiting"); a full round only learns that we stand by for the next one.
    joined.size = header.size;
    if (joined.size < settings_.max_nodes) {
      co_await store_.append(keys::change(round), waiting_line(self_.name));
    } else {
      co_await store_.add(keys::standby(round), 1);
    }
    log_late_join(settings_.run_id, round, joined.size, settings_.max_nodes);
    expected = co_await expected_members(round);
    ++round;
  }
  // The closer wrote the places before the header.
  const std::string place_key = keys::place(round, joined.index);
  const C10dPlace place = decode_place(co_await store_.get_existing(place_key), place_key);
  current_ = Member{header, place, std::nullopt};
  current_index_ = joined.index;
  RendezvousInfo info = info_for(header, place, settings_.run_id);
  log_round_closed(info);
  co_await write_lease(round);
  start_monitor(*current_);
  co_return info;
}

asio::awaitable<void> C10dRendezvous::write_lease(int round) {
  if (auto entry = lease_entry(round)) co_await store_.set(entry->first, entry->second);
}

std::optional<std::pair<std::string, Bytes>> C10dRendezvous::lease_entry(int round) const {
  // The store host needs no lease: when it dies, the store goes with it. The others' lease
  // points at this round's change log, where the members look for lost nodes, and says where
  // this node sat, so that the survivors can derive the next round without it.
  if (self_.is_host) return std::nullopt;
  Lease lease;
  lease.grace = settings_.connection_grace;
  lease.append_key = keys::prefix(settings_.run_id) + "/" + keys::change(round);
  std::optional<LostMember> member;
  if (current_) member = LostMember{current_->place.group_rank, local_world_size_};
  lease.value =
      to_string(lost_line(self_.name, "connection", std::string(kLeaseAfterMs), member));
  return std::make_pair(lease_key(keys::lease_base(self_.name)), encode(lease));
}

asio::awaitable<std::optional<int>> C10dRendezvous::latest_round() {
  // A node that arrives while the job runs starts at the last closed round: it is late there,
  // says so, and joins the next one.
  const std::string latest_key = keys::kLatest;
  std::vector<std::string> probe{latest_key};
  const bool has_latest = co_await store_.check(std::move(probe));
  if (!has_latest) co_return std::nullopt;
  const Bytes value = co_await store_.get_existing(latest_key);
  const auto latest = leading_int(value);
  co_return latest && *latest >= 0 ? static_cast<int>(*latest) : 0;
}

asio::awaitable<int> C10dRendezvous::expected_members(int round) {
  // `round` closed (this node read its header): its closer set the size and began the change
  // log before the header, so both exist.
  std::vector<std::string> read{keys::size(round), keys::change(round)};
  const std::vector<Bytes> values = co_await store_.multi_get_existing(std::move(read));
  const int size = static_cast<int>(leading_int(values.at(0)).value_or(0));
  const RoundChanges changes = parse_changes(values.at(1));
  const auto standby = co_await store_.add(keys::standby(round), 0);
  const int expected =
      std::min(changes.expected_next(size, settings_.max_nodes) + static_cast<int>(standby),
               settings_.max_nodes);
  if (!changes.lost.empty() && expected < settings_.min_nodes) {
    const std::string why = too_few_left(changes.lost, expected, settings_.min_nodes, round);
    co_await close_job(why);
    throw RendezvousClosedError(closed_message(settings_.run_id, why));
  }
  co_return expected;
}

asio::awaitable<C10dRendezvous::Joined> C10dRendezvous::join(int round, int local_world_size,
                                                            int expected) {
  Joined joined;
  joined.round = round;
  C10dNodeDesc desc{self_.name, self_.addr, local_world_size, self_.is_host,
                    {},          0,           self_.rank_hint};
  if (self_.is_host && open_worker_store_) {
    std::tie(desc.master_addr, desc.master_port) = open_worker_store_(round);
  }
  joined.index = static_cast<int>(co_await store_.add(keys::join(round), 1));
  // One request, the heartbeat key first: once the descriptor exists, the closer may publish the
  // round and a neighbour may start reading it.
  std::vector<std::pair<std::string, Bytes>> mine;
  mine.emplace_back(keys::heartbeat(round, joined.index), to_bytes("0"));
  mine.emplace_back(keys::node(round, joined.index), encode(desc));
  co_await store_.multi_set(std::move(mine));
  logger()->debug("joined round={} arrival={} expected={} node={} addr={}", round, joined.index,
                  expected, self_.name, self_.addr);
  co_return joined;
}

// c10d's side of forming a round (engine/round_forming.hpp): a WAIT on the round's header key,
// then one read of it; a count is an ADD of 0 to the arrival counter, and a re-count reads the
// round before's size and change log in one MULTI_GET and its standby counter (expected_members);
// the job's closed key is one CHECK.
struct C10dRendezvous::Forming final : FormingRound {
  Forming(C10dRendezvous& rendezvous, const Joined& joined)
      : rdzv(rendezvous),
        round(joined.round),
        recounting(round > 0 && joined.index <= kRecounters) {}

  asio::awaitable<bool> wait_closed(Clock::time_point until) override {
    const auto wait = std::max(milliseconds(1),
                               std::chrono::duration_cast<milliseconds>(until - Clock::now()));
    // The header, not the size: one wake-up and one read per node when the round closes.
    const std::string key = keys::assignment(round);
    const bool assigned = co_await rdzv.store_.wait_for(c10d_keys::one(key), wait);
    if (!assigned) co_return false;
    const Bytes value = co_await rdzv.store_.get_existing(key);
    if (value == to_bytes(keys::kClosedSize)) {
      co_await rdzv.throw_if_closed();
      throw RendezvousClosedError(fmt::format("c10d rendezvous run={} round={} was closed",
                                              rdzv.settings_.run_id, round));
    }
    header = decode_round_header(value, key);
    co_return true;
  }
  // The first arrivals alone re-count: 100,000 survivors re-reading the log every second would
  // be 700,000 requests a second (ddp-bench rendezvous --simulate).
  bool recounts(int expected, int arrived) const override {
    return recounting && expected > arrived;
  }
  asio::awaitable<Arrivals> count(int expected) override {
    Arrivals arrivals;
    arrivals.arrived = static_cast<int>(co_await rdzv.store_.add(keys::join(round), 0));
    if (recounts(expected, arrivals.arrived)) {
      arrivals.alive = co_await rdzv.expected_members(round - 1);  // throws below min_nodes
    }
    co_return arrivals;
  }
  asio::awaitable<void> close(int size) override { return rdzv.close_round(round, size); }
  asio::awaitable<void> throw_if_closed() override { return rdzv.throw_if_closed(); }
  asio::awaitable<std::vector<std::string>> joined_names(int count) override {
    std::vector<std::string> names;
    for (int i = 1; i <= count; ++i) {
      const std::string key = keys::node(round, i);
      const bool joined = co_await rdzv.store_.check(c10d_keys::one(key));
      if (!joined) continue;
      names.push_back(decode_node_desc(co_await rdzv.store_.get(key), key).name);
    }
    co_return names;
  }

  C10dRendezvous& rdzv;
  int round = 0;
  bool recounting = false;
  C10dRoundHeader header;  // once wait_closed returned true
};

asio::awaitable<C10dRoundHeader> C10dRendezvous::wait_closed(const Joined& joined, int expected,
                                                             Clock::time_point deadline) {
  const FormingRules rules{
      .backend = "c10d",
      .round = joined.round,
      .progress_period = c10d_progress_period(settings_.progress_interval, settings_.max_nodes),
      // While more nodes are expected than have arrived, one of them may have died since this
      // node read the previous round's change log (its lease still points there).
      .recount_period =
          std::clamp(settings_.keep_alive_interval / 2, milliseconds(50), milliseconds(1000))};
  Forming forming(*this, joined);
  co_await form_round(forming, settings_, rules, joined.index, expected, deadline);
  co_return forming.header;
}

asio::awaitable<void> C10dRendezvous::close_round(int round, int size) {
  // The value carries the closer's name so that exactly one node sees its own write come back
  // and publishes the round.
  const Bytes desired = to_bytes(fmt::format("{} {}", size, self_.name));
  const Bytes standing = co_await claim_size(round, desired);
  if (standing != desired) co_return;
  logger()->debug("closing round={} size={} closer={}", round, size, self_.name);
  co_await publish_assignment(round, size);
}

asio::awaitable<void> C10dRendezvous::publish_assignment(int round, int size) {
  // In chunks: a round of 100,000 nodes would exceed the store's keys-per-request limit.
  const auto chunk = static_cast<std::size_t>(std::max(settings_.max_keys_per_request, 1));
  std::vector<std::string> node_keys;
  for (int i = 1; i <= size; ++i) node_keys.push_back(keys::node(round, i));
  std::vector<Bytes> values;
  for (std::size_t at = 0; at < node_keys.size(); at += chunk) {
    const auto end = node_keys.begin() + static_cast<std::ptrdiff_t>(
                                             std::min(at + chunk, node_keys.size()));
    std::vector<std::string> part(node_keys.begin() + static_cast<std::ptrdiff_t>(at), end);
    std::vector<Bytes> got = co_await store_.multi_get(std::move(part));
    for (Bytes& value : got) values.push_back(std::move(value));
  }
  std::vector<std::pair<int, C10dNodeDesc>> nodes;
  for (int i = 1; i <= size; ++i) {
    nodes.emplace_back(i, decode_node_desc(values[static_cast<std::size_t>(i - 1)],
                                           node_keys[static_cast<std::size_t>(i - 1)]));
  }
  const auto restarts = co_await store_.add(keys::kRestarts, 0);
  const C10dAssignment assignment =
      assign_ranks(round, static_cast<int>(restarts), nodes,
                   {settings_.store_host, settings_.store_port});
  const std::vector<C10dPlace> member_places = places_of(assignment);
  // (The change log is not created here: its first line creates it and wakes every member's
  // wait on it, c10d_monitor.cpp.)
  // The places first: members read theirs once the header, which they wait on, exists.
  for (std::size_t at = 0; at < member_places.size(); at += chunk) {
    std::vector<std::pair<std::string, Bytes>> places;
    for (std::size_t g = at; g < std::min(at + chunk, member_places.size()); ++g) {
      places.emplace_back(keys::place(round, assignment.members[g].join_index),
                          encode(member_places[g]));
    }
    co_await store_.multi_set(std::move(places));
  }
  co_await store_.set(keys::assignment(round), encode(header_of(assignment)));
  co_await store_.set(keys::kLatest, to_bytes(std::to_string(round)));
}

asio::awaitable<void> C10dRendezvous::throw_if_closed() {
  const bool closed = co_await store_.check(c10d_keys::one(keys::kClosed));
  if (!closed) co_return;
  const std::string why = to_string(co_await store_.get_existing(keys::kClosed));
  throw RendezvousClosedError(closed_message(settings_.run_id, why));
}

// A wake-up costs a waiting node four requests (the WAIT's cancel, the count, the closed check,
// the WAIT again). At 100,000 nodes every 5 s that is 80,000 requests a second while a round
// forms: the nodes that joined first woke while the others still joined, and each wake-up
// slowed the round it waited for. At most max_nodes nodes wait, so this keeps them within
// 20,000 requests a second.
milliseconds c10d_progress_period(milliseconds progress_interval, int max_nodes) {
  constexpr std::int64_t kWakeRequests = 4;
  constexpr std::int64_t kRequestsPerSecond = 20000;
  const milliseconds budget{std::int64_t{std::max(max_nodes, 0)} * kWakeRequests * 1000 /
                            kRequestsPerSecond};
  return std::max(progress_interval, budget);
}

asio::awaitable<int> C10dRendezvous::report_failure(std::string what) {
  failure_ = what;
  if (current_) failed_round_ = current_->header.round;
  forbid_derived_plan();
  if (!current_) co_return static_cast<int>(co_await store_.add(keys::kRestarts, 1));
  const int round = current_->header.round;
  const Bytes desired = to_bytes(self_.name + " " + what);
  const Bytes stored = co_await store_.compare_set(keys::failed(round), {}, desired);
  if (stored == desired) {
    const auto count = co_await store_.add(keys::kRestarts, 1);
    co_await store_.set(keys::restart_count(round), to_bytes(std::to_string(count)));
    co_await store_.append(keys::change(round), failed_line(self_.name, what));
    logger()->info("reported failure round={} restart_count={}: {}", round, count, what);
    co_return static_cast<int>(count);
  }
  // Another node spent this round's restart; it writes the count right after its add.
  const auto count = leading_int(co_await store_.get(keys::restart_count(round)));
  co_return static_cast<int>(count.value_or(0));
}

asio::awaitable<void> C10dRendezvous::close_job(const std::string& why) {
  co_await store_.compare_set(keys::kClosed, {}, to_bytes(why));
  if (current_) {
    co_await store_.append(keys::change(current_->header.round), closed_line(why));
    // Nodes already waiting for the next round wake up and see the job closed.
    const Bytes closed = to_bytes(keys::kClosedSize);
    const Bytes standing = co_await claim_size(current_->header.round + 1, closed);
    if (standing == closed) {
      co_await store_.set(keys::assignment(current_->header.round + 1), closed);
    }
  }
}

asio::awaitable<void> C10dRendezvous::finish(bool success) {
  if (!success) {
    stop_monitor();
    const std::string why = workers_failed_reason(self_.name, failure_);
    co_await close_job(why);
    if (self_.is_host && current_) co_await wait_until_read(current_->header.round);
    co_return;
  }
  // Finishing is not being lost: the lease goes first (while the store host surely waits in the
  // barrier), so that this agent's exit appends nothing. A restart writes it again.
  if (current_ && !self_.is_host) {
    co_await store_.delete_key(lease_key(keys::lease_base(self_.name)));
  }
  // The agent gave up on this barrier (another node failed) and has moved on: leave it be.
  if (current_) {
    const bool passed = co_await exit_barrier();
    if (!passed) co_return;
  }
  stop_monitor();
  // Nodes still waiting for a next round learn that the job is over. A store host in the round
  // does it alone: the exit barrier keeps it until every member has passed, so the others leave
  // without another store operation (which could meet a host that has just gone).
  if (current_ && (self_.is_host || !current_->header.host_first)) co_await close_job(kJobFinished);
}

asio::awaitable<void> C10dRendezvous::wait_until_read(int round) {
  // The other members learn why the job failed from this store: keep it up until each has read
  // it (they count themselves in r<N>/left), at most close_timeout.
  StoreCoordination coordination(store_);
  co_await wait_for_tally(coordination, keys::left(round), current_->header.size - 1,
                          settings_.close_timeout);
}

}  // namespace ddp::rdzv
