#pragma once
// FanoutSupervisor: the local side of `ddprun --hostfile`. Runs one ssh per host (its own process
// group, dies with ddprun) on one io_context, prints each host's output with a "[host]: " prefix
// (lines the host's agent already labelled "[host:rank]: " stay as they are), forwards
// SIGINT/SIGTERM/SIGHUP/SIGQUIT to every host's agent as a line on its ssh stdin (the agent runs
// with --stdin_signals), and ends the job everywhere when one host fails.
//
// Exit code: 128+S after a signal S here; else the code of the first host whose agent (or ssh)
// ended non-zero on its own, preferring a code other than 1 (what an agent exits with when the
// job ended on another node): the root cause, as srun reports the failing task's code; else 0.
// ssh's own failures (exit 255, or ssh killed by a signal) stop the other hosts at once and are
// named with ssh's message.

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "agent/hostfile/fanout_plan.hpp"

namespace ddp::agent {

struct FanoutOptions {
  // After a host failed on its own, how long the others may take to end by themselves (their
  // rendezvous tells them) before they are told to stop.
  std::chrono::milliseconds peer_grace{std::chrono::seconds(10)};
  // After a stop was sent, how long to wait before killing the ssh connections (the hosts'
  // agents then see their stdin close): their --shutdown_timeout plus a margin.
  std::chrono::milliseconds stop_deadline{std::chrono::seconds(45)};
};

class FanoutSupervisor {
 public:
  // `env` is the environment ssh runs with ("KEY=VALUE").
  FanoutSupervisor(boost::asio::io_context& io, std::vector<RemoteLaunch> launches,
                   std::vector<std::string> env, FanoutOptions options);
  ~FanoutSupervisor();
  FanoutSupervisor(const FanoutSupervisor&) = delete;
  FanoutSupervisor& operator=(const FanoutSupervisor&) = delete;

  // Starts every host's ssh and runs the io_context until all of them have ended; returns the
  // exit code above. Throws IoError when ssh cannot be started here (not found, no pipes).
  int run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Of the non-zero exit codes of the hosts that failed on their own, in the order they ended, the
// index of the root cause: the first code other than 1, else the first. REQUIRES: not empty.
std::size_t root_cause_index(const std::vector<int>& failure_codes);

}  // namespace ddp::agent
