#pragma once
// Hang detection (--hang_timeout): judge_hang() names the ranks that hold the job up, from each
// rank's collective progress (ProgressRecord, published by libddp) and process state; and
// watch_for_hang() samples this node's workers on a timer until it finds one. A rank that is slow
// but still progressing is never called hung: its record keeps changing.

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "agent/stacks/hang_peers.hpp"
#include "agent/stacks/stack_collector.hpp"
#include "common/progress_record.hpp"

namespace ddp::agent {

// One rank as the detector sees it at one moment.
struct RankProgress {
  int rank = 0;
  int local_rank = 0;
  pid_t pid = 0;
  std::optional<ProgressRecord> record;  // nullopt: not a libddp worker (or not initialised yet)
  double idle_s = 0;     // seconds since the record last changed (valid with a record)
  double stopped_s = 0;  // seconds the process has been stopped (state T) without a break
  bool remote = false;   // a rank of another node, known from HangPeers: a waiter, never named
};

struct HangVerdict {
  std::vector<int> lagging;        // the ranks named guilty, ascending
  std::vector<std::string> lines;  // the report's preface: each guilty rank, what others wait in
  std::string summary;             // one line, for the log and the failure's reason
  double idle_s = 0;               // the longest a guilty rank has been without progress
};

// The verdict for one sample, or nullopt. Hung = stopped for >= timeout_s; or no progress for
// >= timeout_s while another rank has waited >= timeout_s in a collective with a higher sequence
// number (it issued a collective the lagging rank never reached). Ranks that all wait in the same
// collective are not judged (no rank can be named).
std::optional<HangVerdict> judge_hang(const std::vector<RankProgress>& ranks, double timeout_s);

struct HangTarget {
  StackTarget worker;
  std::string progress_file;  // $DDPRUN_PROGRESS_FILE of the worker
};

// Samples `targets` (records and /proc state) every min(1 s, max(100 ms, timeout/10)) and returns
// the first verdict. With timeout 0 (detection off) it never completes. Cancellable. With `peers`
// (a multi-node job), this node publishes its ranks' long waits and, while one of its ranks has
// been idle for the timeout, reads the other nodes' (at most once a second), so a rank whose
// waiters are all on other nodes is named too. `node` is this node's group rank.
boost::asio::awaitable<HangVerdict> watch_for_hang(std::vector<HangTarget> targets,
                                                   std::chrono::milliseconds timeout,
                                                   std::shared_ptr<HangPeers> peers = nullptr,
                                                   int node = 0);

}  // namespace ddp::agent
