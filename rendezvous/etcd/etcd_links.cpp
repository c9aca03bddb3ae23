// The two ends of a round's links, and the transaction that declares a loss.
//
// Why a member tells the host's death from a link problem by a refused connect: a SIGKILLed agent's
// kernel closes its sockets (our connection ends) and its listening port (a connect is refused
// at once). A cut link or a frozen machine ends nothing, and a connect there times out: that is
// no evidence, so the member keeps trying and leaves the verdict to etcd's lease. A connect
// that succeeds means the host lives; the member then parks its wait again, within the grace the
// host's store gives a dropped wait (a connection that a call timeout closed, say).
//
// Why a member withdraws its lease before it closes: it leaves a round when the round ends for
// it, and the host may still run that round for a moment (its workers stopping); a lease that
// expired then would declare a live node lost.

#include "rendezvous/etcd/etcd_links.hpp"

#include <fmt/format.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <optional>
#include <sstream>

#include "common/detached_error.hpp"
#include "ddp/error.hpp"
#include "rendezvous/engine/rdzv_log.hpp"
#include "rendezvous/etcd/etcd_keys.hpp"
#include "rendezvous/store/key_table.hpp"
#include "rendezvous/store/memory_store.hpp"
#include "rendezvous/store/store_lease.hpp"
#include "rendezvous/store_client/tcp_store_client.hpp"

namespace ddp::rdzv::etcd {

using namespace asio::experimental::awaitable_operators;
using std::chrono::milliseconds;

namespace {

// Keys of the link store (each agent's own, so no job prefix): the lease of a member of round N
// lives at "r<N>/<member>"; expired leases append their lines to "lost/r<N>".
std::string lease_base(int round, const std::string& member) {
  return fmt::format("r{}/{}", round, member);
}
std::string lost_key(int round) { return fmt::format("lost/r{}", round); }

// "<node> <group_rank> <after_ms>" lines, as the host's store appended them.
struct LostLine {
  std::string node;
  int group_rank = 0;
  milliseconds after{0};
};
std::optional<LostLine> parse_lost_line(const std::string& line) {
  std::istringstream in(line);
  LostLine lost;
  long long after = 0;
  if (!(in >> lost.node >> lost.group_rank >> after)) return std::nullopt;
  lost.after = milliseconds(after);
  return lost;
}

}  // namespace

asio::awaitable<Probe> probe(const std::string& host, std::uint16_t port, milliseconds timeout) {
  const auto executor = co_await asio::this_coro::executor;
  asio::ip::tcp::resolver resolver(executor);
  const auto [resolve_error, endpoints] = co_await resolver.async_resolve(
      host, std::to_string(port), asio::as_tuple(asio::use_awaitable));
  if (resolve_error || endpoints.empty()) co_return Probe::kNoAnswer;
  asio::ip::tcp::socket socket(executor);
  asio::steady_timer deadline(executor, timeout);
  const auto result =
      co_await (socket.async_connect(*endpoints.begin(), asio::as_tuple(asio::use_awaitable)) ||
                deadline.async_wait(asio::as_tuple(asio::use_awaitable)));
  if (result.index() == 1) co_return Probe::kNoAnswer;
  const auto [error] = std::get<0>(result);
  if (!error) co_return Probe::kAccepted;
  co_return error == asio::error::connection_refused ? Probe::kRefused : Probe::kNoAnswer;
}

struct RoundLink::Host {
  KeyTable* table = nullptr;  // null once stopped
  KeyTable::WatcherId watcher = 0;
  std::size_t seen = 0;  // bytes of the lost key already reported
  LinkLoss on_lost;
};

struct RoundLink::Member : std::enable_shared_from_this<RoundLink::Member> {
  Member(asio::any_io_executor ex, LinkTarget t, LinkLoss l)
      : executor(std::move(ex)), target(std::move(t)), on_lost(std::move(l)),
        base(lease_base(target.round, target.self)) {}

  asio::awaitable<void> run();
  asio::awaitable<void> withdraw();
  asio::awaitable<void> connect();

  asio::any_io_executor executor;
  LinkTarget target;
  LinkLoss on_lost;
  std::string base;
  std::unique_ptr<TcpStoreClient> control;  // writes and withdraws the lease
  std::unique_ptr<TcpStoreClient> holder;   // parks the wait on the lease's hold key
  bool stopped = false;
};

std::unique_ptr<RoundLink> RoundLink::watch_members(MemoryStore& links, int round,
                                                    LinkLoss on_lost) {
  std::unique_ptr<RoundLink> link(new RoundLink());
  auto host = std::make_shared<Host>();
  host->table = &links.table();
  host->on_lost = std::move(on_lost);
  // The store's lease expiry appends under the store's own loop turn; the watcher reads the new
  // lines there and reports each. (A weak pointer: a stopped link is unwatched, but the table
  // copies its watcher list before calling them.)
  host->watcher = host->table->watch(
      lost_key(round), [weak = std::weak_ptr<Host>(host)](wire::WatchResponse, const std::string&,
                                                          const Bytes&, const Bytes& value) {
        const auto host = weak.lock();
        if (!host || host->table == nullptr || value.size() <= host->seen) return;
        const std::string fresh(value.begin() + static_cast<std::ptrdiff_t>(host->seen),
                                value.end());
        host->seen = value.size();
        std::istringstream lines(fresh);
        for (std::string line; std::getline(lines, line);) {
          if (const auto lost = parse_lost_line(line)) {
            host->on_lost(lost->node, lost->group_rank, lost->after);
          } else if (!line.empty()) {
            logger()->warn("etcd link: ignoring a malformed lost line '{}'", line);
          }
        }
      });
  link->host_ = std::move(host);
  return link;
}

asio::awaitable<std::unique_ptr<RoundLink>> RoundLink::hold(LinkTarget target, LinkLoss on_lost) {
  const auto executor = co_await asio::this_coro::executor;
  std::unique_ptr<RoundLink> link(new RoundLink());
  link->member_ = std::make_shared<Member>(executor, std::move(target), std::move(on_lost));
  // Leased before this node's workers start: a node that dies with them is found by its link.
  try {
    co_await link->member_->connect();
  } catch (const std::exception& e) {
    logger()->debug("etcd link to {}: connect failed: {}", link->member_->target.host, e.what());
  }
  asio::co_spawn(executor, link->member_->run(),
                 log_if_thrown("rdzv", spdlog::level::warn, "etcd link to the round's host ended"));
  co_return link;
}

RoundLink::~RoundLink() { stop(); }

void RoundLink::stop() {
  if (host_ && host_->table != nullptr) {
    host_->table->unwatch(host_->watcher);
    host_->table = nullptr;
  }
  if (member_ && !member_->stopped) {
    member_->stopped = true;
    asio::co_spawn(member_->executor, member_->withdraw(), asio::detached);
  }
}

asio::awaitable<void> RoundLink::Member::connect() {
  ConnectOptions options;
  options.connect_timeout = std::max(target.grace, milliseconds(1000));
  options.call_timeout = std::chrono::seconds(10);
  options.max_backoff = milliseconds(100);
  auto self = shared_from_this();
  if (!control) {
    auto client = co_await TcpStoreClient::connect(target.host_addr, target.port, options);
    if (stopped) co_return;
    control = std::move(client);
    Lease lease;
    lease.grace = target.grace;
    lease.append_key = lost_key(target.round);
    lease.value = fmt::format("{} {} {}\n", target.self, target.group_rank, kLeaseAfterMs);
    co_await control->set(lease_key(base), encode(lease));
    if (stopped) co_return;
  }
  auto client = co_await TcpStoreClient::connect(target.host_addr, target.port, options);
  if (stopped) co_return;
  holder = std::move(client);
}

asio::awaitable<void> RoundLink::Member::run() {
  auto self = shared_from_this();
  const std::vector<std::string> hold_keys(1, lease_hold_key(base));
  asio::steady_timer pause(executor);
  using Clock = std::chrono::steady_clock;
  Clock::time_point unlinked_since = Clock::now();  // no wait parked at the host since
  std::optional<Clock::time_point> refused_since;   // every connect refused since
  while (!stopped) {
    if (holder) {
      try {
        co_await holder->wait_for(hold_keys, std::chrono::minutes(10));
        continue;
      } catch (const std::exception& e) {
        if (stopped) co_return;
        logger()->debug("etcd link to {} closed: {}", target.host, e.what());
      }
      holder.reset();
      control.reset();
      unlinked_since = Clock::now();
      refused_since.reset();
    }
    const Probe seen = co_await probe(target.host_addr, target.port, target.grace);
    if (stopped) co_return;
    if (seen == Probe::kAccepted) {
      refused_since.reset();
      try {
        co_await connect();
        continue;
      } catch (const std::exception& e) {
        if (stopped) co_return;
        logger()->debug("etcd link to {}: reconnect failed: {}", target.host, e.what());
      }
    } else if (seen == Probe::kRefused) {
      const Clock::time_point now = Clock::now();
      if (!refused_since) refused_since = now;
      if (now - *refused_since >= target.grace) {
        on_lost(target.host, 0,
                std::chrono::duration_cast<milliseconds>(now - unlinked_since));
        co_return;
      }
    } else {
      refused_since.reset();  // no answer proves nothing: the lease decides
    }
    pause.expires_after(std::clamp(target.grace / 4, milliseconds(10), milliseconds(100)));
    boost::system::error_code ec;
    co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

asio::awaitable<void> RoundLink::Member::withdraw() {
  auto self = shared_from_this();
  if (control) {
    try {
      co_await control->delete_key(lease_key(base));
    } catch (const std::exception& e) {
      logger()->debug("etcd link to {}: lease not withdrawn: {}", target.host, e.what());
    }
  }
  // Closing the holder's connection now drops a wait whose lease is gone: nothing follows.
  holder.reset();
  control.reset();
}

asio::awaitable<bool> declare_lost(std::shared_ptr<EtcdKv> client, std::string job,
                                   RoundHeader header, std::string node, int group_rank,
                                   milliseconds after) {
  const int round = header.round;
  const std::string join = keys::join(job, round, node);
  std::optional<std::int64_t> revision = revision_of(header, group_rank);
  if (header.derived) {
    // A derived round's members wrote their records after the plan: the record names its rank.
    const RangeResponse record = co_await client->range(one_key(join));
    revision.reset();
    if (!record.kvs.empty() &&
        decode_node_desc(record.kvs[0].value, join).group_rank == group_rank) {
      revision = record.kvs[0].create_revision;
    }
  }
  if (!revision) co_return false;
  TxnRequest txn;
  txn.compare.push_back({join, Compare::Target::kCreate, *revision, {}});
  txn.compare.push_back({keys::join(job, round + 1, node), Compare::Target::kCreate, 0, {}});
  txn.compare.push_back({keys::all_finished(job, round), Compare::Target::kCreate, 0, {}});
  txn.compare.push_back({keys::closed(job), Compare::Target::kCreate, 0, {}});
  txn.success.push_back({keys::lost(job, round, node), std::to_string(after.count()), 0});
  txn.success_reads.push_back(one_key(join));  // before the delete: the key's lease
  txn.success_deletes.push_back(join);
  const TxnResponse result = co_await client->txn(std::move(txn), "declare " + node + " lost");
  if (!result.succeeded) co_return false;
  logger()->info("round {}: declared node {} lost: its link was closed for {} ms", round, node,
                 after.count());
  const std::int64_t lease =
      result.ranges.empty() || result.ranges[0].kvs.empty() ? 0 : result.ranges[0].kvs[0].lease;
  if (lease != 0) {
    try {
      co_await client->lease_revoke(lease, std::chrono::seconds(2));
    } catch (const IoError& e) {
      logger()->warn("etcd: lease {:x} of lost node {} not revoked (it expires on its own): {}",
                     lease, node, e.what());
    }
  }
  co_return true;
}

}  // namespace ddp::rdzv::etcd
