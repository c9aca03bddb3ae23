#pragma once
// MungeDaemon: a real munged for one test, with a key, socket, pid, seed and log file of its own
// in a fresh directory (no system-wide daemon needed). Needs root (munged checks that its key is
// its own); is_running() is false elsewhere, and the test skips (fails under DDP_REQUIRE_ALL=1).

#include <string>

namespace ddp::rdzv::test {

class MungeDaemon {
 public:
  // Starts munged and returns once it answers on socket() (munged's parent exits only then).
  MungeDaemon();
  // Stops it (SIGTERM to the pid in its pid file) and removes the directory.
  ~MungeDaemon();
  MungeDaemon(const MungeDaemon&) = delete;
  MungeDaemon& operator=(const MungeDaemon&) = delete;

  bool is_running() const { return running_; }
  const std::string& socket() const { return socket_; }
  // Why it is not running ("" when it is).
  const std::string& why_not() const { return why_not_; }

 private:
  std::string dir_;
  std::string socket_;
  bool running_ = false;
  std::string why_not_;
};

// True when the test may go on; otherwise warns (a skip) or, under DDP_REQUIRE_ALL=1, fails.
bool require_munge(const MungeDaemon& daemon);

}  // namespace ddp::rdzv::test
