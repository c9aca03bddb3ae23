#pragma once
// ChildWatch: learns of child exits on the io_context, never by a polling sleep. Each watched
// child gets a pidfd in an asio stream_descriptor (readable when it exits); without pidfd support,
// or when this process is a child subreaper, a SIGCHLD signal_set sweeps as well. Orphans adopted
// into a watched child's process group (grandchildren) are reaped too, so none stays a zombie.
// Single-threaded: runs on the io_context's thread.

#include <boost/asio/io_context.hpp>

#include <sys/types.h>

#include <functional>
#include <memory>

namespace ddp::agent {

struct ChildStatus {
  pid_t pid = 0;
  int exit_code = 0;  // valid when signal == 0
  int signal = 0;     // the terminating signal
};

class ChildWatch {
 public:
  using ExitHandler = std::function<void(const ChildStatus&)>;

  // `on_exit` runs on the loop once per watched child, after the child has been reaped.
  ChildWatch(boost::asio::io_context& io, ExitHandler on_exit);
  ~ChildWatch();  // stops watching; children still running are neither killed nor reaped
  ChildWatch(const ChildWatch&) = delete;
  ChildWatch& operator=(const ChildWatch&) = delete;

  // Watches `pid`, a child of this process that leads its own process group. Call right after
  // fork, before the loop runs again (an exit in between is still seen).
  void watch(pid_t pid);

  // Reaps whatever has exited now, without waiting for the loop (e.g. right after a SIGKILL).
  void sweep();

  // How many watched children have not been reaped yet.
  int pending() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;  // shared with in-flight handlers, which hold it weakly
};

}  // namespace ddp::agent
