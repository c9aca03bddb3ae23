// The running round: heartbeats, the group heartbeat reads and the change-log wait (detached
// coroutines per round), watch_round(), the failure verdict and the exit barrier.
//
// Liveness: every member adds one to its heartbeat counter each interval (now and then with an
// ADD, whose reply tells a member that only beats that the store is still there); the first
// member of each group of join indices reads the next group's counters (c10d_watched) and
// compares values with its own steady clock, so no two machines' clocks are ever compared, and
// the store sees about one request per member per interval. Changes (lost, failed, waiting,
// closed) are pushed: the change log key is created by the first line appended to it, and the
// members that read it (all in a small round, 1 in 16 in a large one: c10d_reads_log) keep a
// WAIT parked on it and write the next round's plan when it appears; the others keep theirs on
// the plan. Nothing polls. One detected loss is enough: any loss ends the round for all.

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "ddp/error.hpp"
#include "rendezvous/c10d/c10d_keys.hpp"
#include "rendezvous/c10d/c10d_rendezvous.hpp"
#include "rendezvous/c10d/c10d_roll_call.hpp"
#include "rendezvous/engine/exit_barrier.hpp"
#include "rendezvous/engine/failure_verdict.hpp"
#include "rendezvous/engine/rdzv_log.hpp"
#include "rendezvous/engine/round_monitor.hpp"
#include "rendezvous/engine/store_coordination.hpp"

namespace ddp::rdzv {

namespace keys = c10d_keys;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// RoundMonitor's changes are the round's change log as last read. The log's wait ends at its
// first line, so refresh() reads later lines itself (the exit barrier, the failure verdict).
struct C10dRendezvous::Monitor : RoundMonitor {
  Monitor(asio::any_io_executor ex, Store& s) : RoundMonitor(ex), tick(ex), store(s) {}
  void stop() override {
    RoundMonitor::stop();
    tick.cancel();
  }

  // Waits `period` (in the exit barrier: for the barrier's key, at most `period`), then reads
  // the change log.
  asio::awaitable<void> refresh(std::chrono::milliseconds period) override;

  asio::steady_timer tick;  // the next beat or read
  int index = 0;  // this node's arrival index
  int size = 0;   // members of the round
  std::optional<DerivedRound> derived;  // the plan, when the round was derived
  std::optional<Bytes> plan;  // the next round's plan, once read or written
  bool may_derive = true;     // false once this node spent a restart in the round
  Store& store;             // the rendezvous's (prefixed) store
  std::string change_key;   // r<N>/change
  std::string passed_key;   // r<N>/all_finished
  std::optional<C10dRollCall> roll_call;  // the failure verdict's, once called
};

namespace {

// How often failure_verdict reads the change log.
constexpr milliseconds kVerdictPoll{50};
// How long a wait on the change log stays parked on a connection of its own before it is parked
// again (a round usually ends sooner: every way a round ends appends to its log).
constexpr milliseconds kChangeWaitPark{std::chrono::minutes(10)};


// The round's change log, empty while nothing has happened (the key does not exist yet).
asio::awaitable<Bytes> read_change_log(Store& store, std::string change_key) {
  Bytes log;
  std::vector<std::string> probe = c10d_keys::one(change_key);
  const bool exists = co_await store.check(std::move(probe));
  if (exists) log = co_await store.get_existing(change_key);
  co_return log;
}

// The value of `key` once it exists (the wait re-parked every `park`); nullopt once `m` stopped.
asio::awaitable<std::optional<Bytes>> await_key(Store& store, const RoundMonitor& m,
                                                std::string key, milliseconds park) {
  while (!m.stopped) {
    const bool exists = co_await store.wait_for(c10d_keys::one(key), park);
    if (exists) break;
  }
  if (m.stopped) co_return std::nullopt;
  Bytes value = co_await store.get_existing(key);  // the wait saw it
  if (m.stopped) co_return std::nullopt;
  co_return value;
}

// A change-log line for a log message (without its newline).
std::string shown(const Bytes& line) {
  std::string text = to_string(line);
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

// One watched member's heartbeat as this node last saw it.
struct Beat {
  Bytes value;  // empty: its key does not exist yet (a derived round's member not there yet)
  Clock::time_point changed;
};

// The watched heartbeats, an absent one read as empty. Once all were seen to exist (at once in a
// joined round: each wrote its heartbeat before its descriptor), one MULTI_GET and no CHECK; in a
// derived round a member that has not written its key yet (or died first) is looked for alone.
asio::awaitable<std::vector<Bytes>> read_beats(Store& store, const std::vector<std::string>& keys,
                                               std::vector<char>& present) {
  const std::vector<std::optional<Bytes>> read = co_await get_existing_keys(store, keys, present);
  std::vector<Bytes> values;
  for (const std::optional<Bytes>& value : read) values.push_back(value.value_or(Bytes{}));
  co_return values;
}

// The lost line for the silent member at `index`: named by its descriptor, with its place (in a
// derived round its group rank is index - 1; in a joined round its place says). A member that
// never wrote its descriptor is named by its index, without a place (the next round re-joins).
asio::awaitable<Bytes> silent_line(Store& store, int round, int index, bool derived,
                                   std::chrono::milliseconds after) {
  const std::string node_key = c10d_keys::node(round, index);
  const bool joined = co_await store.check(c10d_keys::one(node_key));
  if (!joined) {
    co_return lost_line(fmt::format("member-{}-of-round-{}", index, round), "heartbeat",
                        std::to_string(after.count()));
  }
  const std::string place_key = c10d_keys::place(round, index);
  std::vector<std::string> read{node_key};
  if (!derived) read.push_back(place_key);
  const std::vector<Bytes> values = co_await store.multi_get_existing(std::move(read));
  const C10dNodeDesc desc = decode_node_desc(values.at(0), node_key);
  const int rank = derived ? index - 1 : decode_place(values.at(1), place_key).group_rank;
  co_return lost_line(desc.name, "heartbeat", std::to_string(after.count()),
                      LostMember{rank, desc.local_world_size});
}

// A member of a derived round that has not started there may have died between the rounds: its
// lease then said so in the previous round's log, which nobody watches any more. The line for
// such a member (group rank index - 1 here), translated to this round, or nullopt.
std::optional<Bytes> carried_loss(const RoundChanges& before, const DerivedRound& plan,
                                  int index) {
  for (std::size_t i = 0; i < before.lost.size(); ++i) {
    const auto& member = before.lost_members[i];
    if (!member) continue;
    const std::optional<int> rank = derived_rank(plan, member->group_rank);
    if (!rank || *rank != index - 1) continue;
    const NodeLoss& loss = before.losses[i];
    return lost_line(loss.node, loss.detected_by.empty() ? "connection" : loss.detected_by,
                     std::to_string(loss.after.count()),
                     LostMember{*rank, member->local_world_size});
  }
  return std::nullopt;
}

}  // namespace

asio::awaitable<void> C10dRendezvous::Monitor::refresh(milliseconds period) {
  if (finishing) {
    // A bounded wait, not a poll: it returns as soon as the last node finishes, and it holds the
    // connection at most `period`, so the monitor's heartbeats still go out.
    const bool all_passed = co_await store.wait_for(c10d_keys::one(passed_key), period);
    if (all_passed) {
      passed = true;
      co_return;
    }
  } else if (period > milliseconds(0)) {
    asio::steady_timer pause(tick.get_executor(), period);
    boost::system::error_code ec;
    co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  if (stopped || error) co_return;
  changes = parse_changes(co_await read_change_log(store, change_key));
  if (roll_call && !all_present && !changes.failure_cause()) {
    all_present = co_await c10d_roll_answered(store, *roll_call);
    if (all_present) {
      logger()->info("failure verdict round={}: all {} lease holder(s) answered roll call {}, "
                     "so none was lost", round, roll_call->expected, roll_call->generation);
    }
  }
}

C10dWatched c10d_watched(int index, int size) {
  if (size < 2 || index < 1 || index > size) return {};
  const int group = std::min(kC10dWatchGroup, (size + 1) / 2);
  if ((index - 1) % group != 0) return {};  // not the first of its group
  const int groups = (size + group - 1) / group;
  const int next = ((index - 1) / group + 1) % groups;
  const int first = next * group + 1;
  return {first, std::min(group, size - first + 1)};
}

milliseconds c10d_read_period(milliseconds keep_alive_interval) {
  return std::max(keep_alive_interval / 2, milliseconds(50));
}

void C10dRendezvous::watch_changes_on(Store& store) {
  watch_store_.emplace(keys::prefix(settings_.run_id), store);
}

void C10dRendezvous::start_monitor(const Member& member, bool beaten) {
  auto m = std::make_shared<Monitor>(executor_, store_);
  m->round = member.header.round;
  m->change_key = keys::change(m->round);
  m->passed_key = keys::all_finished(m->round);
  m->index = current_index_;
  m->size = member.header.size;
  m->derived = member.derived;
  monitor_ = m;
  const milliseconds interval = settings_.keep_alive_interval;
  const auto lost_after = interval * settings_.keep_alive_max_attempt;
  // A member whose heartbeat still holds the "0" it set when it joined has not started its
  // monitor: it may still be reading its place. At 100,000 members on a busy store the members
  // get their places over more than lost_after (ddp-bench rendezvous --simulate 100000 saw 2,980
  // members declared lost while the first round formed, which closed the job), so such a
  // member is lost only after join_timeout, the bound on forming a round.
  const auto unstarted_after = std::max<milliseconds>(lost_after, settings_.join_timeout);
  const milliseconds period = c10d_read_period(interval);
  const std::string change_key = keys::change(m->round);
  Store& store = store_;
  Store& watch = watch_store_ ? static_cast<Store&>(*watch_store_) : store;
  const milliseconds park = watch_store_ ? kChangeWaitPark : std::min(period, milliseconds(1000));
  // Each part is a detached coroutine that ends when the monitor stops; an error is the round's
  // error (watch_round throws it) unless the monitor stopped first.
  const auto spawn = [this, m](asio::awaitable<void> part) {
    asio::co_spawn(executor_, std::move(part),
                   [m](std::exception_ptr error) { m->part_ended(error, "c10d"); });
  };

  // The change log: one WAIT until its first line, then one read, then (in a round without the
  // store host, whose host proposes in next_round) the next round's plan. Only a few members do
  // that in a large round (c10d_reads_log); the others wait for the plan, which names the lost,
  // and read the log only when the plan is a full join. Later lines matter only to members in
  // the exit barrier, which read the log themselves.
  const std::string plan_key = keys::size(m->round + 1);
  const bool reads_log = member.header.host_first || c10d_reads_log(m->index, m->size);
  std::optional<PlanProposal> proposal;
  if (reads_log && !member.header.host_first) proposal = plan_proposal(member.header);
  spawn([](std::shared_ptr<Monitor> m, Store& watch, std::string change_key, std::string plan_key,
           milliseconds park, bool reads_log,
           std::optional<PlanProposal> proposal) -> asio::awaitable<void> {
    if (!reads_log) {
      std::optional<Bytes> plan = co_await await_key(watch, *m, plan_key, park);
      if (!plan) co_return;
      auto derived = decode_plan(*plan, plan_key);
      if (derived && derived->from_round == m->round) {
        m->plan = std::move(plan);
        m->changes = parse_changes(to_bytes(derived->log));
        logger()->info("round {} changes: lost node(s) in the plan of round {}", m->round,
                       m->round + 1);
        m->wake();
        co_return;
      }
      m->plan = std::move(plan);  // a full join: the log says why
    }
    const std::optional<Bytes> log = co_await await_key(watch, *m, change_key, park);
    if (!log) co_return;
    RoundChanges changes = parse_changes(*log);
    if (reads_log && proposal) {
      proposal->may_derive = proposal->may_derive && m->may_derive;
      StoreCoordination coordination(watch);
      Bytes plan = co_await propose_plan(coordination, std::move(*proposal), changes);
      if (m->stopped) co_return;
      m->plan = std::move(plan);
    }
    m->changes = std::move(changes);
    if (const auto event = m->changes.first_event()) {
      logger()->info("round {} changes: {}", m->round, event->detail);
    }
    m->wake();
  }(m, watch, change_key, plan_key, park, reads_log, std::move(proposal)));

  // The heartbeat, and the group's heartbeats for the members that read them.
  const C10dWatched watched = c10d_watched(m->index, m->size);
  spawn([](std::shared_ptr<Monitor> m, Store& store, C10dWatched watched, milliseconds interval,
           milliseconds period, milliseconds lost_after, milliseconds unstarted_after,
           std::string change_key, bool beaten) -> asio::awaitable<void> {
    std::int64_t beat = beaten ? 1 : 0;
    // Beats between two that ask for a reply: keep_alive_max_attempt, or one call deadline's
    // worth when that is longer, so a cut link is noticed within about two call deadlines.
    const std::int64_t reply_every =
        std::max<std::int64_t>({lost_after / interval, store.timeout() / interval, 1});
    // The first beat goes out at once (unless it went with the round's keys): readers start
    // timing when their own monitor starts, so a member that read the assignment a little later
    // is not mistaken for lost.
    Clock::time_point next_beat = beaten ? Clock::now() + interval : Clock::now();
    Clock::time_point next_read = Clock::now() + period;
    const std::string my_beat = keys::heartbeat(m->round, m->index);
    // (A group never reads itself: there are always two groups or more.)
    std::vector<std::string> beat_keys;
    for (int i = 0; i < watched.count; ++i) {
      beat_keys.push_back(keys::heartbeat(m->round, watched.first + i));
    }
    std::vector<Beat> seen(beat_keys.size(), Beat{{}, Clock::now()});
    std::vector<char> present(beat_keys.size(), 0);
    const Bytes zero = to_bytes("0");  // joined, monitor not started
    // A member beats once its monitor runs (empty: a derived round's member not there yet).
    const auto has_started = [&zero](const Bytes& beat) { return !beat.empty() && beat != zero; };
    bool declared = false;
    bool was_reading = true;
    while (!m->stopped) {
      if (Clock::now() >= next_beat) {
        // Every reply_every-th beat is an ADD (the same +1), the others SETs: a SET has no reply
        // in TCPStore's protocol, so a member that only beats (it reads no group) would never
        // notice a store it can no longer reach (its link cut); the ADD's reply has the call's
        // deadline. A reply to every beat would cost the store a write per beat.
        if (++beat % reply_every == 0) {
          beat = co_await store.add(my_beat, 1);
        } else {
          co_await store.set(my_beat, to_bytes(std::to_string(beat)));
        }
        // A beat that went out late is not followed by catch-up beats: on a loaded store they
        // would only add to what delayed it.
        next_beat = std::max(next_beat + interval, Clock::now() + interval / 2);
        if (m->stopped) break;
      }
      if (Clock::now() >= next_read) {
        // A read that comes late (this process was starved, or the store answered slowly)
        // cannot tell whether the others were silent: silence is timed again from here.
        const bool late = Clock::now() - next_read > std::max(period, lost_after / 2);
        next_read = Clock::now() + period;
        // Once the round is ending, members leave it at their own pace: one that stopped
        // beating has usually moved on, not died. Nodes in the exit barrier still read, because
        // a lost node must not hold the barrier.
        const bool reading =
            !beat_keys.empty() && !declared && (m->finishing || !m->changes.first_event());
        if (reading && (!was_reading || late)) {  // timing restarts
          for (Beat& b : seen) b = Beat{b.value, Clock::now()};
        }
        was_reading = reading;
        if (reading) {
          // Only time that surely passed without a beat counts: from the answer that showed
          // the last change to the moment this read was sent (a slow answer proves nothing).
          const Clock::time_point sent = Clock::now();
          const std::vector<Bytes> values = co_await read_beats(store, beat_keys, present);
          if (m->stopped) break;
          const Clock::time_point answered = Clock::now();
          std::optional<std::size_t> silent;
          std::optional<Bytes> carried;
          bool unstarted = false;
          for (std::size_t i = 0; i < values.size(); ++i) {
            const bool started = has_started(values[i]);
            unstarted = unstarted || !started;
            if (values[i] != seen[i].value) {
              seen[i] = Beat{values[i], answered};
            } else if (!silent && sent - seen[i].changed >=
                                      (started ? lost_after : unstarted_after)) {
              silent = i;
            }
          }
          if (unstarted && m->derived) {
            // Did one of them die between the rounds? (Once a member has started, its own lease
            // speaks for it in this round's log.)
            const RoundChanges before = parse_changes(
                co_await read_change_log(store, keys::change(m->derived->from_round)));
            if (m->stopped) break;
            for (std::size_t i = 0; i < values.size() && !carried; ++i) {
              if (!has_started(values[i])) {
                carried = carried_loss(before, *m->derived, watched.first + static_cast<int>(i));
              }
            }
          }
          if (carried) {
            logger()->warn("a member of round {} died before it started there: {}", m->round,
                           shown(*carried));
            co_await store.append(change_key, *carried);
            declared = true;
            continue;
          }
          if (silent) {
            // A member that saw a change moved on to the next round and stopped beating here:
            // read the log before blaming it (this node's own wait may not have woken yet).
            const RoundChanges fresh = parse_changes(co_await read_change_log(store, change_key));
            if (m->stopped) break;
            if (fresh.first_event(m->finishing)) {
              m->changes = fresh;
              m->wake();
              continue;
            }
            const int index = watched.first + static_cast<int>(*silent);
            const auto after =
                std::chrono::duration_cast<milliseconds>(Clock::now() - seen[*silent].changed);
            const Bytes line =
                co_await silent_line(store, m->round, index, m->derived.has_value(), after);
            logger()->warn("a member missed its heartbeats for {} ms: {}", after.count(),
                           shown(line));
            co_await store.append(change_key, line);
            declared = true;
          }
        }
      }
      m->tick.expires_at(std::min(next_beat, next_read));
      boost::system::error_code ec;
      co_await m->tick.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
  }(m, store, watched, interval, period, lost_after, unstarted_after, change_key, beaten));
}

C10dRendezvous::Seen C10dRendezvous::seen() const {
  if (!monitor_) return {};
  return {monitor_->changes, monitor_->plan};
}

void C10dRendezvous::forbid_derived_plan() {
  if (monitor_) monitor_->may_derive = false;
}

bool c10d_reads_log(int index, int size) {
  const int group = std::min(kC10dWatchGroup, (size + 1) / 2);
  return group < 1 || (index - 1) % group < 2;
}

void C10dRendezvous::stop_monitor() {
  if (monitor_) monitor_->stop();
  monitor_.reset();
}

asio::awaitable<RoundEvent> C10dRendezvous::watch_round() {
  // (`this` may be gone by the time it returns: a rendezvous destroyed mid-round stops its
  // monitor, which the watch shares.)
  return watch_running_round(monitor_);
}

asio::awaitable<bool> C10dRendezvous::exit_barrier() {
  const std::shared_ptr<Monitor> m = monitor_;
  if (!m) throw InternalError("c10d exit barrier outside a running round");
  ExitBarrier barrier;
  barrier.node = self_.name;
  barrier.size = current_->header.size;
  barrier.finished = keys::finished(m->round);
  barrier.passed = keys::all_finished(m->round);
  // The store host keeps the store up until every live member has read the barrier's result.
  barrier.left = keys::left(m->round);
  barrier.keeps_store = self_.is_host;
  barrier.period = std::min(c10d_read_period(settings_.keep_alive_interval), milliseconds(1000));
  barrier.close_timeout = settings_.close_timeout;
  StoreCoordination coordination(store_);
  co_await pass_exit_barrier(coordination, *m, std::move(barrier));
  co_return !m->stopped;
}

asio::awaitable<std::optional<RoundEvent>> C10dRendezvous::failure_verdict(
    Clock::time_point failed_at) {
  const std::shared_ptr<Monitor> m = monitor_;
  if (!current_ || !m || current_->header.size == 1) co_return std::nullopt;  // no peer to lose
  // A dead node's connection closes when it dies, before its workers (parent-death signal) and
  // so before ours notice; its lease then expires `connection_grace` later. The margin covers a
  // loaded store host. With every node alive the roll call ends the wait once all answered.
  m->roll_call.reset();  // an earlier failure's roll call says nothing of this one
  m->all_present = false;
  co_await m->refresh(milliseconds(0));
  if (!m->changes.failure_cause() && !m->stopped && !m->error) {
    m->roll_call = co_await c10d_call_roll(store_, keys::prefix(settings_.run_id),
                                           current_->header, self_.name,
                                           settings_.max_keys_per_request);
  }
  co_return co_await judge_failure(
      *m, failed_at + settings_.connection_grace + settings_.verdict_margin, kVerdictPoll);
}

}  // namespace ddp::rdzv
