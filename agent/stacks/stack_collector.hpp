#pragma once
// collect_stacks(): the stacks of this node's workers, taken while they run and without stopping
// them for longer than a backtrace takes. Python workers (their stack hook registered, see
// stack_hook.hpp) get ddprun's stack signal and dump every thread's Python frames; others, and
// stopped processes that cannot run a handler, get a native backtrace from `eu-stack -p PID`
// (elfutils), else `gdb -batch`. Runs on the agent's io_context; never blocks the loop.

#include <boost/asio/awaitable.hpp>

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "agent/stacks/stack_report.hpp"

namespace ddp::agent {

struct StackTarget {
  int rank = 0;
  int local_rank = 0;
  pid_t pid = 0;
  std::string stack_dir;  // the worker's log dir ($DDPRUN_STACK_DIR)
};

// One stack per target, in the order given. A target that cannot be read gives kind "none" with
// the reason as its text (exited, no tool, no answer within `timeout`). Never throws.
boost::asio::awaitable<std::vector<RankStack>> collect_stacks(std::vector<StackTarget> targets,
                                                              std::string host,
                                                              std::chrono::milliseconds timeout);

// The state letter of /proc/<pid>/stat ('R', 'S', 'D', 'T', 't', 'Z', ...); 0 when `pid` is gone.
char process_state(pid_t pid);

}  // namespace ddp::agent
