#pragma once
// OrphanGuard: if the agent dies, even by SIGKILL, its workers and their children die too. A tiny
// watchdog process, forked once, holds one end of a socket pair and the set of worker process
// groups; when the agent's end closes (the agent exited, whatever the cause) it SIGKILLs those
// groups and exits. Workers also have PR_SET_PDEATHSIG; the guard catches the grandchildren.
// Limits: a grandchild that leaves its worker's process group (setsid) escapes; at most 4096
// groups are tracked at once.

#include <sys/types.h>

#include "common/unique_fd.hpp"

namespace ddp::agent {

class OrphanGuard {
 public:
  // The guard of this process, started on first use. A forked child that calls it gets a guard
  // of its own. Never throws: when the watchdog cannot be started it logs a warning and
  // add()/remove() do nothing.
  static OrphanGuard& instance();

  // Starts or stops guarding process group `pgid`.
  void add(pid_t pgid);
  void remove(pid_t pgid);

  // For a forked worker between fork and exec (async-signal-safe): guards the caller's own
  // process group (it must lead one) through the inherited `socket`. Registering from the child
  // closes the race where the worker, scheduled first, starts grandchildren before the agent
  // gets to add() it. The socket is CLOEXEC, so the worker does not keep it.
  static void add_self(int socket) noexcept;

  // The agent's end of the watchdog socket (-1 when inactive), for add_self.
  int socket() const { return socket_.get(); }
  bool is_active() const { return static_cast<bool>(socket_); }
  pid_t watchdog_pid() const { return watchdog_; }

 private:
  OrphanGuard();
  void start();
  void send(int op, pid_t pgid);

  pid_t owner_ = 0;  // the process this guard belongs to
  pid_t watchdog_ = -1;
  UniqueFd socket_;
};

}  // namespace ddp::agent
