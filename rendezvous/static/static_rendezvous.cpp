// StaticRendezvous: given node ranks, one store on node 0, job-wide restarts and an exit
// barrier through store keys. The key layout is in the header.

#include "rendezvous/static/static_rendezvous.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <nlohmann/json.hpp>
#include <optional>

#include "common/detached_error.hpp"
#include "common/log.hpp"
#include "common/parse_number.hpp"
#include "ddp/error.hpp"
#include "rendezvous/abandonable.hpp"
#include "rendezvous/engine/round_changes.hpp"
#include "rendezvous/store/memory_store.hpp"
#include "rendezvous/store/prefix_store.hpp"
#include "rendezvous/store/store_lease.hpp"
#include "rendezvous/store_client/lease_holder.hpp"
#include "rendezvous/store_client/tcp_store_client.hpp"
#include "rendezvous/store_server/tcp_store_server.hpp"

namespace ddp::rdzv {
namespace {

using asio::use_awaitable;
using json = nlohmann::json;

std::string round_key(int round, const std::string& name) {
  return fmt::format("round/{}/{}", round, name);
}
std::string node_key(int round, int node_rank) {
  return fmt::format("round/{}/node/{}", round, node_rank);
}

// A node's entry in a round, with "version": 1 beside its fields. A node that ends the job
// writes {"version": 1, "closed": <why>} in the next round's place instead.
struct NodeEntry {
  std::string host;
  int local_world_size = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(NodeEntry, host, local_world_size)

// Where node 0's store listens: every interface of the address family of master_addr, as
// torchrun's TCPStore server does (workers on other nodes reach it by master_addr).
std::string bind_host(const std::string& master_addr) {
  return master_addr.find(':') != std::string::npos ? "::" : "";
}

// One key as a list. (A braced list inside a co_await expression trips GCC 12: "array used as
// initializer".)
std::vector<std::string> key_list(std::string key) {
  return std::vector<std::string>(1, std::move(key));
}

// How errors and the round's log name a node: "node 2 (host-b)".
std::string node_label(int node_rank, const std::string& host) {
  return fmt::format("node {} ({})", node_rank, host);
}

long long seconds_of(std::chrono::milliseconds d) {
  return std::chrono::duration_cast<std::chrono::seconds>(d).count();
}

[[noreturn]] void throw_cancelled() {
  throw boost::system::system_error(asio::error::operation_aborted);
}

}  // namespace

struct StaticRendezvous::State {
  State(asio::io_context& io_context, StaticRendezvousOptions opts)
      : io(io_context), options(std::move(opts)), event_timer(io_context) {
    event_timer.expires_at(asio::steady_timer::time_point::max());
  }

  bool is_host() const { return options.node_rank == 0; }
  std::string address() const { return fmt::format("{}:{}", options.master_addr, port); }
  std::string prefix() const { return "/ddprun/" + options.run_id; }

  // Non-host nodes: two connections to node 0's store. The watcher's long waits get their own,
  // so that calls on the other never queue behind them.
  asio::awaitable<void> connect() {
    ConnectOptions connect_options;
    connect_options.connect_timeout = options.timeout;
    connect_options.call_timeout = options.timeout + std::chrono::seconds(30);
    connect_options.credentials = options.security.credentials;
    try {
      client = co_await connect_with_progress(connect_options);
      watch_client = co_await TcpStoreClient::connect(options.master_addr, port, connect_options);
    } catch (const TimeoutError& e) {
      throw TimeoutError(fmt::format(
          "static rendezvous: node 0 (the store host at {}) did not come within {}s: {}",
          address(), seconds_of(options.timeout), e.what()));
    }
    // A third holds this node's lease: when this process dies, its closing tells the store.
    lease_client = co_await TcpStoreClient::connect(options.master_addr, port, connect_options);
    lease_holder = std::make_unique<LeaseHolder>(io.get_executor(), *lease_client,
                                                 prefixed_key(prefix(), lease_base()));
    store = std::make_unique<PrefixStore>(prefix(), *client);
    watch_store = std::make_unique<PrefixStore>(prefix(), *watch_client);
    log::get("rdzv")->info("connected to the store at {} node_rank={}", address(),
                           options.node_rank);
  }

  std::string lease_base() const { return fmt::format("nodes/{}", options.node_rank); }
  std::string label() const { return node_label(options.node_rank, options.node_name); }

  // When the round's log names a lost node, the job cannot go on at its size: closes it naming
  // the first lost node (the first closer's reason stands) and returns the event for the agent.
  // (A lost line names the node's host; its rank is the node rank.)
  asio::awaitable<std::optional<RoundEvent>> lost(const RoundChanges& changes) {
    if (changes.losses.empty()) co_return std::nullopt;
    NodeLoss loss = changes.losses.front();
    const int rank = changes.lost_members.front().value_or(LostMember{-1, 0}).group_rank;
    loss.node = node_label(rank, loss.node);
    const std::string why =
        fmt::format("{} was lost: its store connection closed and stayed closed for {} ms",
                    loss.node, loss.after.count());
    lost_ranks.push_back(rank);
    co_await store->compare_set("closed", {}, to_bytes(why));
    co_return RoundEvent{RoundChange::kNodeLost, why, {loss}};
  }

  void notify(RoundEvent e) {
    if (event) return;
    event = std::move(e);
    event_timer.cancel();
  }

  // This node is done with the job. The store host waits (bounded) for every other node to
  // leave first, so that no client sees its connection reset while it still needs the store.
  asio::awaitable<void> leave() {
    if (left) co_return;
    left = true;
    if (options.nnodes == 1) co_return;
    if (!is_host()) {
      try {
        // Leaving is not being lost: the lease goes first, so its expiry does nothing.
        co_await store->delete_key(lease_key(lease_base()));
        co_await store->set(fmt::format("left/{}", options.node_rank), to_bytes("1"));
      } catch (const std::exception& e) {
        log::get("rdzv")->debug("leave: {}", e.what());
      }
      co_return;
    }
    std::vector<int> ranks;
    std::vector<std::string> keys;
    for (int rank = 1; rank < options.nnodes; ++rank) {
      if (std::find(lost_ranks.begin(), lost_ranks.end(), rank) != lost_ranks.end()) continue;
      ranks.push_back(rank);
      keys.push_back(fmt::format("left/{}", rank));
    }
    const bool all_left = co_await store->wait_for(keys, options.leave_timeout);
    if (all_left) co_return;
    std::vector<int> missing;
    const std::vector<std::size_t> absent_at = co_await absent(keys);
    for (const std::size_t i : absent_at) missing.push_back(ranks[i]);
    log::get("rdzv")->warn("store host leaving before node(s) {} left (waited {}s)",
                           fmt::join(missing, ", "), seconds_of(options.leave_timeout));
  }

  // The positions in `keys` of the keys the store does not hold (the first `limit` of them).
  asio::awaitable<std::vector<std::size_t>> absent(const std::vector<std::string>& keys,
                                                   std::size_t limit = SIZE_MAX) {
    std::vector<std::size_t> positions;
    for (std::size_t i = 0; i < keys.size() && positions.size() < limit; ++i) {
      const bool present = co_await store->check(key_list(keys[i]));
      if (!present) positions.push_back(i);
    }
    co_return positions;
  }

  // Waits for every node's key of `round` and returns the values; a timeout names the nodes
  // that never joined.
  asio::awaitable<std::vector<Bytes>> wait_for_nodes(int round) {
    std::vector<std::string> keys;
    for (int rank = 0; rank < options.nnodes; ++rank) keys.push_back(node_key(round, rank));
    const bool all_joined = co_await wait_with_progress(keys, round);
    if (!all_joined) {
      const std::vector<std::size_t> missing = co_await absent(keys);  // (positions are ranks)
      throw TimeoutError(fmt::format(
          "static rendezvous: node(s) {} of --nnodes={} did not join round {} within {}s "
          "(store at {})",
          fmt::join(missing, ", "), options.nnodes, round, seconds_of(options.timeout), address()));
    }
    co_return co_await store->multi_get(keys);
  }

  // TcpStoreClient::connect in slices of the progress interval, with a warning after each one
  // that ends without node 0's store, until options.timeout.
  asio::awaitable<std::unique_ptr<TcpStoreClient>> connect_with_progress(ConnectOptions base) {
    const auto deadline = std::chrono::steady_clock::now() + options.timeout;
    for (;;) {
      ConnectOptions slice = base;
      slice.connect_timeout = std::max(std::chrono::milliseconds(1), slice_until(deadline));
      try {
        co_return co_await TcpStoreClient::connect(options.master_addr, port, slice);
      } catch (const TimeoutError&) {
        if (std::chrono::steady_clock::now() >= deadline) throw;
      }
      log::get("rdzv")->warn("waiting for node 0 (the store host at {}) to start: {}s left",
                             address(), seconds_until(deadline));
    }
  }

  // A short rendezvous timeout reports more often: at least four times before it ends.
  std::chrono::milliseconds progress_interval() const {
    return std::max(std::chrono::milliseconds(1),
                    std::min(options.progress_interval, options.timeout / 4));
  }

  // The next slice of a wait that ends at `deadline`: what is left of it, at most one
  // progress_interval().
  std::chrono::milliseconds slice_until(std::chrono::steady_clock::time_point deadline) const {
    return std::min(progress_interval(), std::chrono::duration_cast<std::chrono::milliseconds>(
                                             deadline - std::chrono::steady_clock::now()));
  }

  // Whole seconds until `deadline`, rounded up (a wait that goes on never says "0s left").
  static long long seconds_until(std::chrono::steady_clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    return (left.count() + 999) / 1000;
  }

  // wait_for(keys, timeout) that says every progress_interval what it waits for: the missing
  // node ranks on the store host (its wait is the one that names them), a line on the others.
  asio::awaitable<bool> wait_with_progress(const std::vector<std::string>& keys, int round) {
    const auto deadline = std::chrono::steady_clock::now() + options.timeout;
    for (;;) {
      const std::chrono::milliseconds slice = slice_until(deadline);
      if (slice <= std::chrono::milliseconds(0)) co_return false;
      const bool present = co_await store->wait_for(keys, slice);
      if (present) co_return true;
      const long long seconds_left = seconds_until(deadline);
      if (seconds_left <= 0) continue;
      std::string missing;
      if (is_host()) {
        const std::vector<std::size_t> ranks = co_await absent(keys, 16);
        if (!ranks.empty()) {
          missing = fmt::format(" (missing node_rank {})", fmt::join(ranks, ", "));
        }
      }
      log::get("rdzv")->warn(
          "waiting for the nodes of --nnodes={} to join round {} at {}{}: {}s left", options.nnodes,
          round, address(), missing, seconds_left);
    }
  }

  asio::io_context& io;
  StaticRendezvousOptions options;
  std::unique_ptr<TcpStoreServer> server;
  std::unique_ptr<TcpStoreClient> client;
  std::unique_ptr<TcpStoreClient> watch_client;
  std::unique_ptr<TcpStoreClient> lease_client;
  std::unique_ptr<LeaseHolder> lease_holder;  // after its client: stopped before the client goes
  std::vector<int> lost_ranks;                // nodes this node saw lost (leave() skips them)
  std::unique_ptr<PrefixStore> store;        // this node's calls
  std::unique_ptr<PrefixStore> watch_store;  // the watcher's waits
  std::uint16_t port = 0;
  int round = -1;
  std::optional<RoundEvent> event;  // why the current round must end, once known
  asio::steady_timer event_timer;   // cancelled when `event` is set (a condition variable)
  bool left = false;
};

namespace {

using State = StaticRendezvous::State;

// Runs in the background for round `round` of a multi-node job: waits for the round's restart
// key, which report_failure() or finish(false) on any node sets, and turns it into a RoundEvent.
// It owns a share of the state, so it may outlive the rendezvous object until its wait ends.
asio::awaitable<void> watch_loop(std::shared_ptr<State> s, int round) {
  const std::string key = round_key(round, "event");
  for (;;) {
    try {
      const bool ended = co_await s->watch_store->wait_for(key_list(key), s->options.timeout);
      if (ended) break;
      if (s->round != round || s->left) co_return;
    } catch (const std::exception& e) {
      if (s->round == round && !s->left) {
        s->notify({RoundChange::kNodeLost,
                   fmt::format("the store at {} is gone: {}", s->address(), e.what())});
      }
      co_return;
    }
  }
  std::string detail;
  try {
    std::optional<RoundEvent> lost =
        co_await s->lost(parse_changes(co_await s->watch_store->get(key)));
    if (lost) {
      if (s->round == round) s->notify(std::move(*lost));
      co_return;
    }
    detail = to_string(co_await s->watch_store->get(round_key(round, "failed")));
  } catch (const std::exception& e) {
    detail = e.what();
  }
  if (s->round == round) s->notify({RoundChange::kPeerFailed, detail});
}

// The exit barrier's wait: until the round's end key is set, then (store host) until the other
// nodes left. Run detached so that the agent can abandon it (a signal, a peer's failure)
// without waiting for a store call that has no cancellation.
asio::awaitable<std::string> barrier_wait(std::shared_ptr<State> s, int round) {
  const std::string key = round_key(round, "end");
  const bool ended = co_await s->store->wait_for(key_list(key), s->options.timeout);
  if (!ended) {
    const auto finished = co_await s->store->add(round_key(round, "finished"), 0);
    throw TimeoutError(fmt::format(
        "exit barrier: {} of {} nodes finished within {}s (store at {})", finished,
        s->options.nnodes, seconds_of(s->options.timeout), s->address()));
  }
  std::string end = to_string(co_await s->store->get(key));
  if (end == "finished") co_await s->leave();
  co_return end;
}

}  // namespace

StaticRendezvous::StaticRendezvous(asio::io_context& io, StaticRendezvousOptions options)
    : state_(std::make_shared<State>(io, std::move(options))) {
  auto& s = *state_;
  s.port = s.options.master_port;
  if (s.is_host()) {
    const JobGuards guards(s.options.security);
    s.server = std::make_unique<TcpStoreServer>(io, bind_host(s.options.master_addr),
                                                s.options.master_port, StoreLimits{},
                                                guards.shared_store());
    s.server->start();
    s.port = s.server->port();
    s.store = std::make_unique<PrefixStore>(s.prefix(), s.server->store());
    s.watch_store = std::make_unique<PrefixStore>(s.prefix(), s.server->store());
    log::get("rdzv")->info("store listening on port {} (workers use {}){}", s.port, s.address(),
                           s.options.security.credentials ? "; agents authenticate" : "");
    if (!s.options.security.credentials) {
      warn_open_store("the job's store", s.options.master_addr, s.port);
    }
  }
}

StaticRendezvous::~StaticRendezvous() {
  // A watcher may still hold the state; it must not report into an agent that is gone.
  state_->left = true;
  state_->event_timer.cancel();
  // This agent is gone: its lease connection closes, as when the process dies. (A node that left
  // properly deleted its lease first.)
  state_->lease_holder.reset();
  state_->lease_client.reset();
}

std::uint16_t StaticRendezvous::store_port() const { return state_->port; }

asio::awaitable<RendezvousInfo> StaticRendezvous::next_round(int local_world_size) {
  auto s = state_;
  if (!s->store) co_await s->connect();
  const int round = ++s->round;
  s->event.reset();
  s->event_timer.expires_at(asio::steady_timer::time_point::max());
  auto& store = *s->store;
  const auto& options = s->options;

  const bool closed = co_await store.check(key_list("closed"));
  if (closed) {
    const std::string reason = to_string(co_await store.get("closed"));
    co_await s->leave();
    throw RendezvousClosedError("the job ended on another node: " + reason);
  }
  const auto restart_count = static_cast<int>(co_await store.add("restart_count", 0));
  if (restart_count > options.max_restarts) {
    co_await s->leave();
    throw RendezvousClosedError(
        fmt::format("the job failed: {} restarts spent, --max_restarts={}", restart_count,
                    options.max_restarts));
  }

  if (!s->is_host()) {
    // This round's lease: if this node dies, the store wakes the round's watchers.
    Lease lease;
    lease.grace = options.connection_grace;
    lease.append_key = s->prefix() + "/" + round_key(round, "event");
    lease.value = to_string(lost_line(options.node_name, "connection", std::string(kLeaseAfterMs),
                                      LostMember{options.node_rank, local_world_size}));
    co_await store.set(lease_key(s->lease_base()), encode(lease));
  }
  json mine = NodeEntry{options.node_name, local_world_size};
  mine["version"] = 1;
  co_await store.set(node_key(round, options.node_rank), to_bytes(mine.dump()));
  const auto values = co_await s->wait_for_nodes(round);

  RendezvousInfo info;
  info.run_id = options.run_id;
  info.round = round;
  info.group_rank = options.node_rank;
  info.group_world_size = options.nnodes;
  info.restart_count = restart_count;
  info.master_addr = options.master_addr;
  info.master_port = s->port;
  info.world_size = 0;
  for (int rank = 0; rank < options.nnodes; ++rank) {
    const auto node =
        json::parse(to_string(values[static_cast<std::size_t>(rank)]), nullptr, false);
    if (node.is_discarded() || !node.is_object()) {
      throw IoError(fmt::format("static rendezvous: unreadable entry of node {} in round {}", rank,
                                round));
    }
    if (node.contains("closed")) {
      co_await s->leave();
      throw RendezvousClosedError("the job ended on another node: " +
                                  node["closed"].get<std::string>());
    }
    const auto entry = node.get<NodeEntry>();
    if (rank < options.node_rank) info.rank_base += entry.local_world_size;
    info.world_size += entry.local_world_size;
    info.node_names.push_back(entry.host);
  }
  log::get("rdzv")->info("round {} closed: node_rank={} nodes={} world_size={} restart_count={}",
                         round, info.group_rank, info.group_world_size, info.world_size,
                         info.restart_count);
  if (options.nnodes > 1) {
    asio::co_spawn(s->io, watch_loop(s, round),
                   log_if_thrown("rdzv", spdlog::level::debug, "round watcher ended"));
  }
  co_return info;
}

asio::awaitable<RoundEvent> StaticRendezvous::watch_round() {
  auto s = state_;
  for (;;) {
    if (s->event) co_return *s->event;
    co_await s->event_timer.async_wait(asio::as_tuple(use_awaitable));
    if (!s->event) throw_cancelled();  // only notify() cancels the timer; else we were cancelled
  }
}

asio::awaitable<int> StaticRendezvous::report_failure(std::string what) {
  auto s = state_;
  auto& store = *s->store;
  const int round = s->round;
  const std::string mine = fmt::format("{}: {}", s->label(), what);
  const auto current = co_await store.compare_set(round_key(round, "failed"), {}, to_bytes(mine));
  if (to_string(current) != mine) {
    // Another node reported this round first and spends the restart for both of us.
    const std::string restart = to_string(co_await store.get(round_key(round, "restart")));
    const auto count = parse_number<int>(restart);
    if (!count)
      throw Error(fmt::format("round {}: restart count '{}' is not a number", round, restart));
    co_return *count;
  }
  const auto count = static_cast<int>(co_await store.add("restart_count", 1));
  if (count > s->options.max_restarts) {
    // The job is over: say why before any other node wakes, so that its next round reports this
    // failure instead of only the spent restarts.
    co_await store.compare_set("closed", {}, to_bytes(mine));
  }
  co_await store.set(round_key(round, "end"), to_bytes("restart"));
  co_await store.set(round_key(round, "restart"), to_bytes(std::to_string(count)));
  co_await store.append(round_key(round, "event"), failed_line(s->label(), what));
  co_return count;
}

asio::awaitable<std::optional<RoundEvent>> StaticRendezvous::failure_verdict(
    std::chrono::steady_clock::time_point failed_at) {
  auto s = state_;
  if (s->options.nnodes == 1 || !s->store) co_return std::nullopt;
  // As c10d's: a dead node's connection closes before our workers notice its workers are gone.
  const auto until = failed_at + s->options.connection_grace + s->options.verdict_margin;
  const std::string key = round_key(s->round, "event");
  asio::steady_timer tick(s->io);
  for (;;) {
    const bool happened = co_await s->store->check(key_list(key));
    if (happened) {
      const RoundChanges changes = parse_changes(co_await s->store->get(key));
      std::optional<RoundEvent> lost = co_await s->lost(changes);
      // Another node's failure (its report came first) is this node's to report_failure.
      if (lost || !changes.failed.empty()) co_return lost;
    }
    if (std::chrono::steady_clock::now() >= until) co_return std::nullopt;
    tick.expires_after(std::chrono::milliseconds(50));
    co_await tick.async_wait(use_awaitable);
  }
}

asio::awaitable<void> StaticRendezvous::finish(bool success) {
  auto s = state_;
  if (s->left || !s->store) co_return;
  if (s->options.nnodes == 1) {
    s->left = true;
    co_return;
  }
  auto& store = *s->store;
  const int round = s->round;
  if (!success) {
    // Wake every other node wherever it is: watchers (restart key), nodes waiting in the next
    // round (this node's closed entry) and nodes in the exit barrier (end key).
    const std::string reason = s->label() + " failed";
    co_await store.compare_set("closed", {}, to_bytes(reason));  // a failure may have said why
    const json closed_entry = {{"version", 1}, {"closed", reason}};
    co_await store.set(node_key(round + 1, s->options.node_rank), to_bytes(closed_entry.dump()));
    const bool restarting = co_await store.check(key_list(round_key(round, "restart")));
    if (!restarting) {
      co_await store.compare_set(round_key(round, "failed"), {}, to_bytes(reason));
      co_await store.set(round_key(round, "end"), to_bytes("failed"));
      const auto count = co_await store.add("restart_count", 0);
      co_await store.set(round_key(round, "restart"), to_bytes(std::to_string(count)));
      co_await store.append(round_key(round, "event"), failed_line(s->label(), "failed"));
    }
    co_await s->leave();
    co_return;
  }
  const auto finished = co_await store.add(round_key(round, "finished"), 1);
  if (finished == s->options.nnodes) {
    co_await store.set(round_key(round, "end"), to_bytes("finished"));
  }
  const std::string end = co_await abandonable(barrier_wait(s, round));
  if (end == "finished") co_return;
  if (end == "failed") throw RendezvousClosedError("the job ended on another node");
  // "restart": another node's workers failed after ours succeeded. watch_round() reports it;
  // the agent races the two, so wait here until it cancels us.
  asio::steady_timer never(s->io, asio::steady_timer::time_point::max());
  co_await never.async_wait(asio::as_tuple(use_awaitable));
  throw_cancelled();
}

}  // namespace ddp::rdzv
