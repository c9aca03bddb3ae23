// ChildWatch on Linux: pidfd_open + waitid(P_PIDFD) per child; SIGCHLD + waitid sweeps as the
// fallback and for orphans a subreaper adopts. Reaping is by pid or by the child's process group,
// never waitpid(-1): other code in the process may own children of its own.

#include "agent/process/child_watch.hpp"

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>

#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <optional>
#include <deque>

#include "agent/process/process_spawner.hpp"
#include "common/log.hpp"

namespace ddp::agent {

namespace asio = boost::asio;

struct ChildWatch::Impl : std::enable_shared_from_this<ChildWatch::Impl> {
  struct Entry {
    pid_t pid = 0;
    std::optional<asio::posix::stream_descriptor> pidfd;
    bool reaped = false;
  };

  asio::io_context& io;
  ExitHandler on_exit;
  std::deque<Entry> entries;  // deque: pending waits never see their descriptor move
  std::optional<asio::signal_set> sigchld;

  Impl(asio::io_context& io_context, ExitHandler handler)
      : io(io_context), on_exit(std::move(handler)) {}

  Entry* find(pid_t pid) {
    for (auto& e : entries) {
      if (e.pid == pid) return &e;
    }
    return nullptr;
  }

  static ChildStatus status_of(const siginfo_t& info) {
    ChildStatus s;
    s.pid = info.si_pid;
    if (info.si_code == CLD_EXITED) {
      s.exit_code = info.si_status;
    } else {
      s.signal = info.si_status;
    }
    return s;
  }

  void deliver(Entry& entry, const siginfo_t& info) {
    entry.reaped = true;
    if (entry.pidfd) {
      boost::system::error_code ignored;
      entry.pidfd->close(ignored);
    }
    const pid_t pid = entry.pid;
    reap_orphans(pid);
    on_exit(status_of(info));  // may not touch `entries` structurally (see watch())
  }

  // Reaps children in process group `pgid` (the worker itself, if not yet reaped, and orphans
  // this subreaper adopted from it).
  void reap_orphans(pid_t pgid) {
    while (true) {
      siginfo_t info{};
      if (::waitid(P_PGID, static_cast<id_t>(pgid), &info, WEXITED | WNOHANG) != 0) {
        if (errno == EINTR) continue;
        return;  // ECHILD: nothing left in that group
      }
      if (info.si_pid == 0) return;
      if (Entry* e = find(info.si_pid); e != nullptr && !e->reaped) {
        deliver(*e, info);
      } else {
        log::get("agent")->debug("reaped orphan pid={} of worker process group {}", info.si_pid,
                                 pgid);
      }
    }
  }

  void sweep() {
    for (size_t i = 0; i < entries.size(); ++i) {
      if (entries[i].reaped) continue;
      siginfo_t info{};
      if (::waitid(P_PID, static_cast<id_t>(entries[i].pid), &info, WEXITED | WNOHANG) == 0 &&
          info.si_pid != 0) {
        deliver(entries[i], info);
      }
    }
    for (size_t i = 0; i < entries.size(); ++i) reap_orphans(entries[i].pid);
  }

  void arm_pidfd(Entry& entry) {
    auto on_ready = [weak = weak_from_this(), pid = entry.pid](boost::system::error_code ec) {
      auto self = weak.lock();
      if (!self || ec) return;
      self->on_pidfd_ready(pid);
    };
    entry.pidfd->async_wait(asio::posix::descriptor_base::wait_read, std::move(on_ready));
  }

  void on_pidfd_ready(pid_t pid) {
    Entry* entry = find(pid);
    if (entry == nullptr || entry->reaped) return;
    siginfo_t info{};
    const int fd = entry->pidfd->native_handle();
    if (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(fd), &info,
                 WEXITED | WNOHANG) == 0 &&
        info.si_pid != 0) {
      deliver(*entry, info);
    } else if (errno == ECHILD) {
      // Reaped by someone else (a process-group sweep delivers it first; this is a bug guard).
      entry->reaped = true;
    } else {
      arm_pidfd(*entry);
    }
  }

  void ensure_sigchld() {
    if (sigchld) return;
    sigchld.emplace(io, SIGCHLD);
    arm_sigchld();
  }

  void arm_sigchld() {
    sigchld->async_wait([weak = weak_from_this()](boost::system::error_code ec, int) {
      auto self = weak.lock();
      if (!self || ec) return;
      self->sweep();
      self->arm_sigchld();
    });
  }
};

ChildWatch::ChildWatch(asio::io_context& io, ExitHandler on_exit)
    : impl_(std::make_shared<Impl>(io, std::move(on_exit))) {
  if (is_child_subreaper()) impl_->ensure_sigchld();
}

ChildWatch::~ChildWatch() = default;

void ChildWatch::watch(pid_t pid) {
  auto& entry = impl_->entries.emplace_back();
  entry.pid = pid;
  // The raw syscall: glibc 2.36's <sys/pidfd.h> lacks extern "C" and does not link from C++.
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd >= 0) {
    entry.pidfd.emplace(impl_->io, fd);
    impl_->arm_pidfd(entry);
  } else {
    // No pidfd (old kernel, fd limit): SIGCHLD, then one sweep for an exit that came first.
    log::get("agent")->debug("pidfd_open({}) failed (errno={}); watching with SIGCHLD", pid, errno);
    impl_->ensure_sigchld();
    impl_->sweep();
  }
}

void ChildWatch::sweep() { impl_->sweep(); }

int ChildWatch::pending() const {
  int n = 0;
  for (const auto& e : impl_->entries) n += e.reaped ? 0 : 1;
  return n;
}

}  // namespace ddp::agent
