// The running round: heartbeats, the neighbour watch and the change log poll (a detached
// coroutine per round), watch_round(), the failure verdict and the exit barrier.
//
// Liveness is a ring: the member of group rank g watches g+1's heartbeat counter and compares
// values with its own steady clock, so no two machines' clocks are ever compared, and the store
// sees O(nodes) reads per interval. One detected loss is enough: any loss ends the round for all.

#include <fmt/format.h>

#include <algorithm>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/log.hpp"
#include "ddp/error.hpp"
#include "rendezvous/c10d/c10d_keys.hpp"
#include "rendezvous/c10d/c10d_rendezvous.hpp"

namespace ddp::rdzv {

namespace keys = c10d_keys;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct C10dRendezvous::Monitor {
  explicit Monitor(asio::any_io_executor ex) : tick(ex), signal(ex) {
    signal.expires_at(Clock::time_point::max());
  }
  void wake() { signal.cancel(); }
  std::optional<RoundEvent> event() const { return changes.first_event(finishing); }

  asio::steady_timer tick;    // the poll period
  asio::steady_timer signal;  // never expires; cancelled to wake watch_round / finish
  bool stopped = false;
  bool finishing = false;  // this node is in the exit barrier
  C10dChanges changes;     // the round's change log as last read
  std::exception_ptr error;
  int round = 0;
  int index = 0;            // this node's arrival index
  int neighbour_index = 0;  // 0: no neighbour (one-node round)
  std::string neighbour;
};

namespace {

std::shared_ptr<spdlog::logger> logger() { return log::get("rdzv"); }

milliseconds poll_period(milliseconds interval) {
  return std::clamp(interval / 2, milliseconds(50), milliseconds(1000));
}

// Waits on a timer that is cancelled to signal; false when this coroutine itself was cancelled.
asio::awaitable<bool> wait_signal(asio::steady_timer& timer) {
  boost::system::error_code ec;
  co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  const auto state = co_await asio::this_coro::cancellation_state;
  co_return state.cancelled() == asio::cancellation_type::none;
}

// How often failure_verdict reads the change log.
constexpr milliseconds kVerdictPoll{50};

// What a cancelled watch_round returns. Only a caller that lost a race cancels it, and that
// caller discards the value; returning it, rather than throwing operation_aborted, spares every
// agent two exceptions at the end of each round.
RoundEvent abandoned_watch() { return {RoundChange::kPeerFailed, "watch abandoned"}; }

}  // namespace

// A poll a second per member is 200,000 requests a second at 100,000 members, about twice what
// one store core serves: ddp-bench rendezvous --simulate 100000 saw beats fall 27 s behind and
// 669 members declared lost while the first round formed. Heartbeats still go out every
// interval; only the reads of the change log and the neighbour thin out past 10,000 members.
milliseconds c10d_poll_period(milliseconds keep_alive_interval, int members) {
  constexpr std::int64_t kPollRequestsPerSecond = 20000;  // 2 requests a poll: WAIT + MULTI_GET
  const milliseconds budget{std::int64_t{std::max(members, 0)} * 2 * 1000 /
                            kPollRequestsPerSecond};
  return std::max(poll_period(keep_alive_interval), budget);
}

void C10dRendezvous::start_monitor(const Member& member) {
  auto m = std::make_shared<Monitor>(executor_);
  m->round = member.header.round;
  m->index = current_index_;
  m->neighbour_index = member.place.neighbour_index;
  m->neighbour = member.place.neighbour;
  monitor_ = m;
  const milliseconds interval = settings_.keep_alive_interval;
  const auto lost_after = interval * settings_.keep_alive_max_attempt;
  // A neighbour whose heartbeat still holds the "0" it set when it joined has not started its
  // monitor: it may still be reading its place. At 100,000 members on a busy store the members
  // get their places over more than lost_after (ddp-bench rendezvous --simulate 100000 saw 2,980
  // members declared lost while the first round formed, which closed the job), so such a
  // neighbour is lost only after join_timeout, the bound on forming a round.
  const auto unstarted_after = std::max<milliseconds>(lost_after, settings_.join_timeout);
  const milliseconds period = c10d_poll_period(interval, member.header.size);
  Store& store = store_;
  asio::co_spawn(
      executor_,
      [m, &store, interval, period, lost_after, unstarted_after]() -> asio::awaitable<void> {
        std::int64_t beat = 0;
        // The first beat goes out at once: watchers start timing when their own monitor starts,
        // so a neighbour that read the assignment a little later is not mistaken for lost.
        Clock::time_point next_beat = Clock::now();
        Bytes last_seen;
        Clock::time_point last_change = Clock::now();
        const std::string change_key = keys::change(m->round);
        const std::string my_beat = keys::heartbeat(m->round, m->index);
        const std::string their_beat = keys::heartbeat(m->round, m->neighbour_index);
        std::size_t log_size = 0;
        bool neighbour_lost = false;
        bool was_watching = true;
        Clock::time_point next_poll = Clock::now();
        while (!m->stopped) {
          if (Clock::now() >= next_beat) {
            co_await store.set(my_beat, to_bytes(std::to_string(++beat)));
            next_beat += interval;
            if (m->stopped) break;
          }
          if (Clock::now() < next_poll) {  // a beat between two polls (large rounds)
            m->tick.expires_at(std::min(next_beat, next_poll));
            boost::system::error_code ec;
            co_await m->tick.async_wait(asio::redirect_error(asio::use_awaitable, ec));
            continue;
          }
          next_poll = Clock::now() + period;
          // Once the round is ending, members leave it at their own pace: a neighbour that
          // stopped beating has usually moved on, not died. Nodes in the exit barrier still
          // watch, because a lost node must not hold the barrier.
          const bool watch_neighbour = m->neighbour_index != 0 && !neighbour_lost &&
                                       (m->finishing || !m->changes.first_event());
          if (watch_neighbour && !was_watching) last_change = Clock::now();  // timing restarts
          was_watching = watch_neighbour;
          std::vector<std::string> watched{change_key};
          if (watch_neighbour) watched.push_back(their_beat);
          const std::vector<Bytes> values = co_await store.multi_get(watched);
          if (m->stopped) break;
          if (values[0].size() != log_size) {
            log_size = values[0].size();
            m->changes = parse_changes(values[0]);
            if (const auto event = m->changes.first_event()) {
              logger()->info("round {} changes: {}", m->round, event->detail);
            }
            m->wake();
          }
          if (watch_neighbour) {
            const Clock::time_point now = Clock::now();
            if (values[1] != last_seen) {
              last_seen = values[1];
              last_change = now;
            } else if (now - last_change >= (last_seen == to_bytes("0") ? unstarted_after
                                                                         : lost_after)) {
              neighbour_lost = true;
              const auto silent = std::chrono::duration_cast<milliseconds>(now - last_change);
              logger()->warn("node {} missed its heartbeats for {} ms: declaring it lost",
                             m->neighbour, silent.count());
              co_await store.append(change_key, lost_line(m->neighbour, "heartbeat",
                                                          std::to_string(silent.count())));
              next_poll = Clock::now();
              continue;  // read the log back at once
            }
          }
          m->tick.expires_at(std::min(next_beat, next_poll));
          boost::system::error_code ec;
          co_await m->tick.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        }
      },
      [m](std::exception_ptr error) {
        if (error && !m->stopped) {
          try {
            std::rethrow_exception(error);
          } catch (const std::exception& e) {
            logger()->error("c10d round {} monitor failed: {}", m->round, e.what());
          }
          m->error = error;
        }
        m->wake();
      });
}

void C10dRendezvous::stop_monitor() {
  if (!monitor_) return;
  monitor_->stopped = true;
  monitor_->tick.cancel();
  monitor_->wake();
  monitor_.reset();
}

asio::awaitable<RoundEvent> C10dRendezvous::watch_round() {
  const std::shared_ptr<Monitor> m = monitor_;
  while (m && !m->stopped) {
    if (m->error) std::rethrow_exception(m->error);
    if (const auto event = m->event()) co_return *event;
    if (!co_await wait_signal(m->signal)) co_return abandoned_watch();
  }
  // Not in a running round, or this node itself left it (the exit barrier passed, or the agent
  // moved on to the next round): nothing can change it any more. Wait until cancelled; the
  // agent's race ends through its other branch. (`this` may be gone by now: a rendezvous
  // destroyed mid-round stops its monitor too.)
  asio::steady_timer forever(co_await asio::this_coro::executor, Clock::time_point::max());
  if (co_await wait_signal(forever)) throw InternalError("c10d watch_round woke without a round");
  co_return abandoned_watch();
}

asio::awaitable<void> C10dRendezvous::exit_barrier() {
  const int round = current_->header.round;
  const auto size = static_cast<std::int64_t>(current_->header.size);
  const std::shared_ptr<Monitor> m = monitor_;
  if (m) m->finishing = true;
  if (co_await store_.add(keys::finished(round), 1) == size) {
    co_await store_.set(keys::all_finished(round), to_bytes("1"));
  }
  asio::steady_timer tick(executor_);
  // A bounded wait, not a poll: it returns as soon as the last node finishes, and it holds the
  // connection at most half a heartbeat interval, so the monitor's heartbeats still go out.
  const milliseconds period = poll_period(settings_.keep_alive_interval);
  std::int64_t lost = 0;
  for (;;) {
    if (co_await store_.wait_for(c10d_keys::one(keys::all_finished(round)), period)) break;
    if (m && m->error) {
      logger()->warn("exit barrier abandoned: the store is gone");
      co_return;
    }
    if (m && m->changes.closed && !m->changes.finished()) {
      logger()->warn("exit barrier short-circuited: job closed: {}", *m->changes.closed);
      co_return;
    }
    // A lost node never finishes: the barrier waits only for the live ones.
    lost = m ? static_cast<std::int64_t>(m->changes.lost.size()) : 0;
    if (lost > 0 && co_await store_.add(keys::finished(round), 0) + lost >= size) {
      logger()->warn("exit barrier passed without lost node(s): {}",
                     fmt::format("{}", fmt::join(m->changes.lost, ", ")));
      break;
    }
  }
  const auto left = co_await store_.add(keys::left(round), 1);
  if (!self_.is_host) co_return;
  // The host keeps the store up until every live member has read the barrier's result (bounded).
  const auto live = size - lost;
  const Clock::time_point until = Clock::now() + settings_.close_timeout;
  for (auto n = left; n < live && Clock::now() < until;
       n = co_await store_.add(keys::left(round), 0)) {
    tick.expires_after(milliseconds(20));
    co_await tick.async_wait(asio::use_awaitable);
  }
}

asio::awaitable<std::optional<RoundEvent>> C10dRendezvous::failure_verdict(
    Clock::time_point failed_at) {
  if (!current_ || current_->header.size == 1) co_return std::nullopt;  // no peer to lose
  // A dead node's connection closes when it dies, before its workers (parent-death signal) and
  // so before ours notice; its lease then expires `connection_grace` later. The margin covers a
  // loaded store host; only a failure with every node alive waits it out.
  const Clock::time_point until =
      failed_at + settings_.connection_grace + settings_.verdict_margin;
  const std::string change_key = keys::change(current_->header.round);
  asio::steady_timer tick(executor_);
  for (;;) {
    const C10dChanges changes = parse_changes(co_await store_.get(change_key));
    if (auto cause = changes.failure_cause()) co_return cause;
    if (Clock::now() >= until) co_return std::nullopt;
    tick.expires_after(kVerdictPoll);
    co_await tick.async_wait(asio::use_awaitable);
  }
}

}  // namespace ddp::rdzv
