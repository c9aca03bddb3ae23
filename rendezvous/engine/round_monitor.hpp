#pragma once
// RoundMonitor: what every backend's monitor of a running round shares. A backend's monitor (its
// detached coroutines: c10d's heartbeats and change-log wait, etcd's watch) fills `changes` and
// wakes the signal; watch_round, the failure verdict and the exit barrier (exit_barrier.hpp,
// failure_verdict.hpp) wait on it through refresh() and read `changes`. Runs on the agent's
// io_context; shared (shared_ptr) between the rendezvous and the monitor's coroutines, which end
// once `stopped` is set.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>

#include <exception>
#include <functional>
#include <memory>
#include <optional>

#include "rendezvous/engine/round_changes.hpp"
#include "rendezvous/rendezvous.hpp"

namespace ddp::rdzv {

struct RoundMonitor {
  explicit RoundMonitor(asio::any_io_executor executor);
  virtual ~RoundMonitor() = default;

  void wake() { signal.cancel(); }
  // Ends the monitor: its coroutines stop at their next step, and every waiter wakes.
  virtual void stop() {
    stopped = true;
    wake();
  }
  // The change the agent acts on now (nullopt: none yet).
  std::optional<RoundEvent> event() const { return changes.first_event(finishing); }
  // A detached part of the monitor ended: its error (unless the monitor stopped first) becomes
  // the round's error, which watch_round throws; logged as "<backend> round N monitor failed".
  void part_ended(std::exception_ptr error, const char* backend);
  // Waits at most `period` for news of the round (`changes`, `passed`, `all_present`). Here: for
  // the signal, where a backend's watch pushes every change (etcd). A backend whose monitor
  // stops reading at the round's first change (c10d) reads the news itself.
  virtual asio::awaitable<void> refresh(std::chrono::milliseconds period);

  asio::steady_timer signal;  // never expires; cancelled to wake watch_round, the barrier, verdict
  bool stopped = false;
  bool finishing = false;  // this node is in the exit barrier
  RoundChanges changes;    // what the round's log or watch said so far
  bool passed = false;       // the round's exit barrier passed: every live member finished
  bool all_present = false;  // every member answered a roll call made after a failure
  std::exception_ptr error;
  int round = 0;
};

// Waits on a timer that is cancelled to signal; false when this coroutine itself was cancelled.
asio::awaitable<bool> wait_signal(asio::steady_timer& timer);

// Rendezvous::watch_round over a monitor (null: not in a running round): the first change, or
// the monitor's error, or `other_error()` when it returns one (etcd: the lost lease). Outside a
// running round nothing can change it: waits until cancelled. A cancelled watch returns a value
// nobody reads (only a caller that lost a race cancels it): no exception at each round's end.
asio::awaitable<RoundEvent> watch_running_round(
    std::shared_ptr<RoundMonitor> monitor,
    std::function<std::exception_ptr()> other_error = nullptr);

}  // namespace ddp::rdzv
