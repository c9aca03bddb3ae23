#pragma once
// The exit barrier of a running round, once for every backend: a member that finished arrives,
// and returns once every live member has (a lost member never finishes: the barrier waits only
// for the others), the job closed for another reason, or the round's monitor failed. Over
// Coordination (the arrivals, the barrier's "passed" key) and the round's RoundMonitor (lost
// members, the job's close, the passed barrier). Runs on the agent's io_context.

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>

#include "rendezvous/engine/coordination.hpp"
#include "rendezvous/engine/round_monitor.hpp"

namespace ddp::rdzv {

struct ExitBarrier {
  std::string node;      // this member
  std::int64_t size = 0;  // the round's members
  std::string finished;  // tally of the members that finished
  std::string passed;    // the key whose existence says the barrier passed
  // Tally of the members that read the barrier's result ("" : none is kept). The host of a store
  // the others read the barrier from (c10d's store host) keeps it up until every live member
  // counted itself there, at most close_timeout.
  std::string left;
  bool keeps_store = false;
  std::chrono::milliseconds period{1000};  // at most this long between looks at the round
  std::chrono::milliseconds close_timeout{std::chrono::seconds(30)};
};

// Returns at once, leaving the barrier, once the monitor stops (the agent gave up on the barrier,
// say for another node's failure, and moved on: its caller must then leave the job be).
// REQUIRES: `monitor` is the round's running monitor. `other_error`: a backend's reason to give
// up besides the monitor's error (etcd: its lease is lost); may be empty.
asio::awaitable<void> pass_exit_barrier(Coordination& coordination, RoundMonitor& monitor,
                                        ExitBarrier barrier,
                                        std::function<std::exception_ptr()> other_error = {});

// Waits until `tally` counts `members`, at most `timeout` (the store host keeping its store up
// until the others read what they need from it).
asio::awaitable<void> wait_for_tally(Coordination& coordination, std::string tally,
                                     std::int64_t members, std::chrono::milliseconds timeout);

}  // namespace ddp::rdzv
