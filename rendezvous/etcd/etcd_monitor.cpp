// The running etcd round: one watch on the round's prefix (a detached coroutine per round),
// watch_round(), failures and their verdict, the exit barrier and the end of the job.
//
// Events: a DELETE of a member's join key is a lost node (its lease expired or was revoked);
// ev/failed, ev/closed and ev/waiting/<node> are a peer's failure, the job's end and a late node.
// They fill the same RoundChanges the c10d backend reads from its change log, so both backends
// answer the agent alike.

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/detached_error.hpp"
#include "common/parse_number.hpp"
#include "ddp/error.hpp"
#include "rendezvous/engine/exit_barrier.hpp"
#include "rendezvous/engine/failure_verdict.hpp"
#include "rendezvous/engine/rdzv_log.hpp"
#include "rendezvous/engine/round_monitor.hpp"
#include "rendezvous/etcd/etcd_absentees.hpp"
#include "rendezvous/etcd/etcd_coordination.hpp"
#include "rendezvous/etcd/etcd_keys.hpp"
#include "rendezvous/etcd/etcd_lease.hpp"
#include "rendezvous/etcd/etcd_rendezvous.hpp"

namespace ddp::rdzv::etcd {

// RoundMonitor's changes are filled from the round's watch.
struct EtcdRendezvous::Monitor : RoundMonitor {
  explicit Monitor(asio::any_io_executor ex) : RoundMonitor(std::move(ex)) {}
  void stop() override {
    RoundMonitor::stop();
    watch->cancel();
    if (before) before->cancel();
  }

  std::shared_ptr<KvWatch> watch;
  std::shared_ptr<KvWatch> before;  // a derived round's: the records of the round it came from
  bool roll_call = false;  // ev/roll_call exists (this node has answered it)
};

namespace {

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

// The place of the member whose record `kv` was in the round of `header`; nullopt when the
// record is not a member's (a late node's join).
std::optional<LostMember> member_of(const RoundHeader& header, const KeyValue& kv) {
  const NodeDesc desc = decode_node_desc(kv.value, kv.key);
  std::optional<int> rank;
  if (header.derived) {
    if (desc.group_rank >= 0) rank = desc.group_rank;
  } else {
    rank = group_rank_of(header, kv.create_revision);
  }
  if (!rank) return std::nullopt;
  return LostMember{*rank, desc.local_world_size};
}

struct RollCall {
  std::string node;         // this node
  std::string presents;     // the answers' tally (present/r<N>/)
  std::string all_present;  // the event that every member answered
  std::int64_t lease = 0;
  std::int64_t size = 0;  // the round's members
};

// This node's answer to a roll call: an arrival at the answers' tally, bound to its lease. The
// answers have increasing revisions, so the last one counts them all and says so.
asio::awaitable<void> answer_roll_call(std::shared_ptr<EtcdKv> client, RollCall call) {
  EtcdCoordination answers(*client, [lease = call.lease] { return lease; });
  const std::int64_t answered = co_await answers.arrive(call.presents, call.node);
  if (answered >= call.size) {
    std::vector<std::pair<std::string, Bytes>> all;
    all.emplace_back(call.all_present, to_bytes("1"));
    co_await answers.put(std::move(all));
  }
}

// Hands each response of `watch` to `take` until the monitor stops; when `take` says it changed
// the round, wakes the monitor's waiters and logs one line per kind of change the agent acts on
// (not one per event: at 1,024 nodes the exit's departures alone would log a growing list a
// thousand times).
template <class Take>
void follow(asio::any_io_executor executor, std::shared_ptr<RoundMonitor> m,
            std::shared_ptr<KvWatch> watch, Take take) {
  asio::co_spawn(
      executor,
      [m, watch, take]() mutable -> asio::awaitable<void> {
        std::optional<RoundChange> logged;
        while (!m->stopped) {
          const auto response = co_await watch->next(Clock::time_point::max());
          if (!response) break;
          if (!take(*response)) continue;
          if (const auto event = m->event(); event && event->change != logged) {
            logged = event->change;
            logger()->info("round {} changes: {}", m->round, event->detail);
          }
          m->wake();
        }
      },
      [m](std::exception_ptr error) { m->part_ended(error, "etcd"); });
}

}  // namespace

void EtcdRendezvous::start_monitor(const Member& member) {
  auto m = std::make_shared<Monitor>(executor_);
  m->round = member.header.round;
  const std::string prefix = keys::round(job_, m->round);
  m->watch = client_->watch(prefix, prefix_end(prefix), member.header.revision + 1, true);
  monitor_ = m;
  if (lease_) {
    lease_->on_lost = [weak = std::weak_ptr<Monitor>(m)] {
      if (const auto monitor = weak.lock()) monitor->wake();
    };
  }
  const std::string joins = keys::joins(job_, m->round);
  const std::string waiting = keys::waiting(job_, m->round, "");
  const std::string lost = keys::lost(job_, m->round, "");
  const std::string failed = keys::failed(job_, m->round);
  const std::string closed = keys::closed_event(job_, m->round);
  const std::string all_finished = keys::all_finished(job_, m->round);
  const std::string roll_call = keys::roll_call(job_, m->round);
  const std::string all_present = keys::all_present(job_, m->round);
  const RollCall answer{self_.name, keys::presents(job_, m->round),
                        all_present, lease_ ? lease_->id : 0, member.header.size};
  const std::shared_ptr<EtcdKv> client = client_;
  const auto lease_ttl = std::chrono::duration_cast<std::chrono::milliseconds>(settings_.lease_ttl);
  const RoundHeader header = member.header;
  const std::string self = self_.name;
  follow(executor_, m, m->watch, [=](const WatchResponse& response) {
    // A member is lost: its link closed (ev/lost/<node>, with the closed link's milliseconds), or
    // its join key was deleted without that, its lease ended (at most a TTL after its last
    // keep-alive). The loss carries how it was found and that bound, as c10d's lines carry their
    // heartbeat window, so the agent logs a node_lost event for it. A loss by connection puts
    // ev/lost/<node> and deletes the join key in one revision: the put says how it was found,
    // whatever the order of the two events.
    for (const WatchEvent& e : response.events) {
      if (!e.is_delete && starts_with(e.kv.key, lost)) {
        const std::string name = e.kv.key.substr(lost.size());
        if (name != self) {
          const auto after = parse_leading_number<std::int64_t>(e.kv.value).value_or(0);
          m->changes.record_loss(NodeLoss{name, "connection", std::chrono::milliseconds(after)},
                                 std::nullopt);
        }
      }
    }
    for (const WatchEvent& e : response.events) {
      const std::string& key = e.kv.key;
      if (starts_with(key, joins)) {
        const std::string name = key.substr(joins.size());
        // A member's key deleted: its lease ended (or its link closed: see above).
        if (e.is_delete && e.prev_kv && name != self) {
          if (const auto member = member_of(header, *e.prev_kv)) {
            m->changes.record_loss(NodeLoss{name, "lease", lease_ttl}, member);
          }
        }
      } else if (e.is_delete || starts_with(key, lost)) {
        continue;
      } else if (starts_with(key, waiting)) {
        m->changes.add_waiting(key.substr(waiting.size()));
      } else if (key == failed) {
        m->changes.failed.push_back(failed_detail(e.kv.value));
      } else if (key == closed && !m->changes.closed) {
        m->changes.closed = e.kv.value;
      } else if (key == all_finished) {
        m->passed = true;
      } else if (key == roll_call && !m->roll_call) {
        m->roll_call = true;  // a member's workers failed: say that this node is alive
        asio::co_spawn(m->signal.get_executor(), answer_roll_call(client, answer),
                       log_if_thrown("rdzv", spdlog::level::warn, "etcd roll call not answered"));
      } else if (key == all_present) {
        m->all_present = true;
      }
    }
    return true;
  });
  if (member.before && member.plan) watch_records_before(member);
}

void EtcdRendezvous::watch_records_before(const Member& member) {
  const std::shared_ptr<Monitor> m = monitor_;
  const std::string joins = keys::joins(job_, member.before->round);
  m->before = client_->watch(joins, prefix_end(joins), member.header.revision + 1, true);
  const auto lease_ttl = std::chrono::duration_cast<std::chrono::milliseconds>(settings_.lease_ttl);
  follow(executor_, m, m->before,
         [m, joins, lease_ttl, before = *member.before, plan = *member.plan,
          self = self_.name](const WatchResponse& response) {
           bool lost = false;
           for (const WatchEvent& e : response.events) {
             const std::string name = e.kv.key.substr(joins.size());
             if (!e.is_delete || !e.prev_kv || name == self) continue;
             const auto was = member_of(before, *e.prev_kv);
             const auto rank = was ? derived_rank(plan, was->group_rank) : std::nullopt;
             if (!rank) continue;  // not a member, or lost already in the plan
             m->changes.record_loss(NodeLoss{name, "lease", lease_ttl},
                                    LostMember{*rank, was->local_world_size});
             lost = true;
           }
           return lost;
         });
}

void EtcdRendezvous::find_dead_in_plan(const RoundHeader& prev) {
  // Two nodes lost a moment apart: the first loss ends round N and the plan keeps the second,
  // whose link to this host ended with round N's watch. It never puts its record here, and
  // without this its join key in round N (which the derived round's monitor watches) would go
  // only with its lease. Each look is one transaction, and a connect per absentee.
  const std::weak_ptr<Monitor> weak = monitor_;
  const Clock::time_point until =
      Clock::now() + std::chrono::duration_cast<std::chrono::milliseconds>(settings_.lease_ttl);
  asio::co_spawn(
      executor_,
      [weak, client = client_, job = job_, prev, grace = settings_.connection_grace,
       until]() -> asio::awaitable<void> {
        asio::steady_timer pause(co_await asio::this_coro::executor);
        for (;;) {
          if (const auto m = weak.lock(); !m || m->stopped) co_return;
          const Absentees found = co_await declare_dead_absentees(client, job, prev, grace);
          if (found.absent == found.declared || Clock::now() + grace >= until) co_return;
          pause.expires_after(grace);
          co_await pause.async_wait(asio::use_awaitable);
        }
      },
      log_if_thrown("rdzv", spdlog::level::warn,
                    "etcd: the derived round's absentees not asked (their leases will say)"));
}

asio::awaitable<void> EtcdRendezvous::start_link(Member member) {
  const RoundHeader& header = member.header;
  if (header.size < 2 || header.link_port == 0 || header.host.empty() ||
      header.master_addr.empty()) {
    co_return;  // no peer, or a host without a link store
  }
  // A loss is declared in etcd; the round's watch then tells every member, this one included.
  LinkLoss on_lost = [executor = executor_, client = client_, job = job_, header](
                         std::string node, int group_rank, std::chrono::milliseconds after) {
    logger()->warn("round {}: node {} (group rank {}) is gone: its link has been closed for {} ms",
                   header.round, node, group_rank, after.count());
    asio::co_spawn(
        executor, declare_lost(client, job, header, node, group_rank, after),
        log_if_thrown("rdzv", spdlog::level::warn,
                      fmt::format("etcd: node {} not declared lost (its lease will say)", node)));
  };
  if (member.group_rank == 0) {
    if (links_ != nullptr) link_ = RoundLink::watch_members(*links_, header.round, on_lost);
    co_return;
  }
  LinkTarget target{header.master_addr, header.link_port, header.round, self_.name,
                    member.group_rank,  header.host,      settings_.connection_grace};
  std::unique_ptr<RoundLink> link = co_await RoundLink::hold(std::move(target), std::move(on_lost));
  // (The round may have ended meanwhile: a link outside a running round would only mislead.)
  if (monitor_ && monitor_->round == header.round && !monitor_->stopped) link_ = std::move(link);
}

RoundChanges EtcdRendezvous::seen() const { return monitor_ ? monitor_->changes : RoundChanges{}; }

void EtcdRendezvous::stop_monitor() {
  link_.reset();
  if (monitor_) monitor_->stop();
  monitor_.reset();
}

std::function<std::exception_ptr()> EtcdRendezvous::lease_error() const {
  if (const std::shared_ptr<Lease> lease = lease_) return [lease] { return lease->error; };
  return {};
}

asio::awaitable<RoundEvent> EtcdRendezvous::watch_round() {
  return watch_running_round(monitor_, lease_error());
}

asio::awaitable<int> EtcdRendezvous::report_failure(std::string what) {
  failure_ = what;
  if (current_) failed_round_ = current_->header.round;
  const std::string restarts_key = keys::restarts(job_);
  for (;;) {
    RangeRequest read;
    read.key = restarts_key;
    const RangeResponse restarts = co_await client_->range(std::move(read));
    const std::int64_t mod = restarts.kvs.empty() ? 0 : restarts.kvs[0].mod_revision;
    const int count = restarts.kvs.empty() ? 1 : failed_restart_count(restarts.kvs[0].value) + 1;
    TxnRequest txn;
    txn.compare.push_back({restarts_key, Compare::Target::kMod, mod, {}});
    txn.success.push_back({restarts_key, std::to_string(count), 0});
    if (current_) {
      // At most one restart per round: the first failure of the round spends it.
      const std::string failed_key = keys::failed(job_, current_->header.round);
      txn.compare.push_back({failed_key, Compare::Target::kCreate, 0, {}});
      txn.success.push_back({failed_key, failed_value(count, self_.name, what), 0});
      RangeRequest failed_read;
      failed_read.key = failed_key;
      txn.failure.push_back(std::move(failed_read));
    }
    const TxnResponse result = co_await client_->txn(std::move(txn), "report failure");
    if (result.succeeded) {
      logger()->info("reported failure round={} restart_count={}: {}",
                     current_ ? current_->header.round : -1, count, what);
      co_return count;
    }
    if (!result.ranges.empty() && !result.ranges[0].kvs.empty()) {
      co_return failed_restart_count(result.ranges[0].kvs[0].value);  // another node spent it
    }
  }
}

asio::awaitable<std::optional<RoundEvent>> EtcdRendezvous::failure_verdict(
    Clock::time_point failed_at) {
  const std::shared_ptr<Monitor> m = monitor_;
  if (!current_ || !m || current_->header.size == 1) co_return std::nullopt;  // no peer to lose
  const int round = current_->header.round;
  // A SIGKILLed node does not revoke its lease: etcd expires it at most a TTL after its last
  // keep-alive, which came before it died, and so before our workers failed because it died.
  // Its join key's DELETE then reaches the watch. The margin covers etcd's expiry sweep and a
  // loaded machine.
  const std::chrono::milliseconds ttl = std::max<std::chrono::milliseconds>(
      settings_.lease_ttl, lease_ ? lease_->ttl : std::chrono::seconds(0));
  const Clock::time_point until = failed_at + ttl + settings_.verdict_margin;
  // Waiting all of that would cost every failure of a healthy job a TTL. So this node calls the
  // roll: every member answers as soon as its watch carries the call. A node that died before
  // our failure (the one that could have caused it) cannot answer a call made after it, so once
  // every member has answered, no node was lost and the failure is this node's own. The first
  // failing member's call serves every later one: if all answered it, that member's failure is
  // its own and it spends the round's restart, which the later ones' reports then find spent.
  TxnRequest call;
  call.compare.push_back({keys::roll_call(job_, round), Compare::Target::kCreate, 0, {}});
  call.success.push_back({keys::roll_call(job_, round), self_.name, 0});
  try {
    co_await client_->txn(std::move(call), "roll call round " + std::to_string(round));
  } catch (const IoError& e) {
    logger()->warn("etcd roll call not made ({}); waiting for a loss as long as a lease lives",
                   e.what());
  }
  logger()->info(
      "failure verdict round={}: waiting up to {:.1f} s for a lost node, a peer's failure or "
      "every member's answer to the roll call",
      round, seconds(until - Clock::now()));
  // (The watch wakes the monitor on every change; the poll only bounds the wait.)
  std::optional<RoundEvent> cause = co_await judge_failure(*m, until, std::chrono::seconds(1));
  if (cause) co_return cause;
  if (m->all_present) {
    logger()->info(
        "failure verdict round={}: all {} members answered the roll call, so none was lost: "
        "the failure is this node's own",
        round, current_->header.size);
  } else if (!m->stopped && !m->error) {
    logger()->info("failure verdict round={}: no loss seen within the lease TTL + margin", round);
  }
  co_return std::nullopt;
}

asio::awaitable<void> EtcdRendezvous::close_job(const std::string& why) {
  TxnRequest txn;
  txn.compare.push_back({keys::closed(job_), Compare::Target::kCreate, 0, {}});
  txn.success.push_back({keys::closed(job_), why, 0});
  co_await client_->txn(std::move(txn), "close job");
  if (!current_) co_return;
  const int round = current_->header.round;
  // (Named requests: a braced list inside a co_await expression is miscompiled by GCC 12.)
  PutRequest event{keys::closed_event(job_, round), why, 0};
  co_await client_->put(std::move(event));
  // Nodes already waiting for the next round wake up and see the job closed (a join plan there
  // gives way: a few tries, each of which finds what another wrote).
  const std::string next_key = keys::assignment(job_, round + 1);
  std::optional<std::string> join_plan_there;
  for (int attempt = 0; attempt < 4; ++attempt) {
    TxnRequest next;
    next.compare.push_back(claim_compare(next_key, join_plan_there));
    next.success.push_back({next_key, keys::kClosedRound, 0});
    next.failure.push_back(one_key(next_key));
    const TxnResponse result = co_await client_->txn(std::move(next), "close the next round");
    if (result.succeeded || result.ranges.empty() || result.ranges[0].kvs.empty()) co_return;
    const std::string& there = result.ranges[0].kvs[0].value;
    if (!is_join_plan(to_bytes(there))) co_return;
    join_plan_there = there;
  }
}

asio::awaitable<void> EtcdRendezvous::exit_barrier() {
  const std::shared_ptr<Monitor> m = monitor_;
  const std::shared_ptr<Lease> lease = lease_;
  ExitBarrier barrier;
  barrier.node = self_.name;
  barrier.size = current_->header.size;
  barrier.finished = keys::dones(job_, m->round);  // outside the round's prefix: no watch sees them
  barrier.passed = keys::all_finished(job_, m->round);
  EtcdCoordination coordination(*client_, [lease] { return lease->id; });
  std::function<std::exception_ptr()> lost = lease_error();  // (named: coawait_conditions.py)
  co_await pass_exit_barrier(coordination, *m, std::move(barrier), std::move(lost));
}

asio::awaitable<void> EtcdRendezvous::finish(bool success) {
  if (!success) {
    stop_monitor();
    const std::string why = workers_failed_reason(self_.name, failure_);
    co_await close_job(why);
    co_await leave();
    co_return;
  }
  if (current_ && monitor_) {
    const std::shared_ptr<Monitor> m = monitor_;
    co_await exit_barrier();
    // The agent gave up on this barrier (another node failed) and has moved on: leave it be.
    if (m->stopped) co_return;
  }
  stop_monitor();
  // Nodes still waiting for a next round learn that the job is over; group rank 0 says it once.
  if (current_ && current_->group_rank == 0) co_await close_job(kJobFinished);
  // No revoke: it would delete our join key while other members still watch the round (each
  // stops when it sees the barrier pass), one event to each; at 1,024 nodes that is up to a
  // million events, which stalls etcd's apply loop and with it everyone's keep-alives. The lease
  // expires a TTL after our last keep-alive, when nobody watches any more.
  release();
}

void EtcdRendezvous::release() {
  if (!lease_) return;
  lease_->stop();
  lease_.reset();
}

asio::awaitable<void> EtcdRendezvous::leave() {
  const std::shared_ptr<Lease> lease = lease_;
  if (!lease) co_return;
  lease_.reset();
  lease->stop();
  try {
    co_await client_->lease_revoke(lease->id, std::chrono::seconds(2));
  } catch (const IoError& e) {
    logger()->warn("etcd: could not revoke lease {:x} (it expires in {} s): {}", lease->id,
                   lease->ttl.count(), e.what());
  }
}

}  // namespace ddp::rdzv::etcd
