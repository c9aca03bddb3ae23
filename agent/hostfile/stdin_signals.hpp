#pragma once
// StdinSignals: the remote end of the --hostfile fan-out. An agent started with --stdin_signals
// reads signal names from its stdin (the ssh channel), one a line ("SIGTERM"), and sends each to
// itself, so the agent's own handling (forward to workers, grace, exit 128+N) runs. EOF means
// the ssh connection is gone: it sends itself SIGHUP, so a lost launcher leaves no orphan.
// Runs on the agent's io_context.

#include <boost/asio/io_context.hpp>
#include <memory>

namespace ddp::agent {

class StdinSignals {
 public:
  // Starts reading a duplicate of fd 0 on `io`. Throws IoError when stdin cannot be watched
  // (a regular file or a closed descriptor).
  explicit StdinSignals(boost::asio::io_context& io);
  ~StdinSignals();
  StdinSignals(const StdinSignals&) = delete;
  StdinSignals& operator=(const StdinSignals&) = delete;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;  // shared with the pending read, which holds it weakly
};

}  // namespace ddp::agent
