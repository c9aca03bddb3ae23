// The orphan guard's watchdog. It runs in a forked copy of the agent, so it only makes
// async-signal-safe calls and allocates nothing: a fixed table of process groups filled from
// SOCK_SEQPACKET records {op, pgid}. A socket, not a pipe, so that the agent's send() can use
// MSG_NOSIGNAL and never dies of SIGPIPE if the watchdog is gone.

#include "agent/orphan_guard.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "common/log.hpp"

namespace ddp::agent {
namespace {

constexpr int32_t kAdd = 1;
constexpr int32_t kRemove = 2;
constexpr size_t kMaxGroups = 4096;

struct Record {
  int32_t op;
  int32_t pgid;
};

[[noreturn]] void run_watchdog(int sock) {
  // Own process group, deaf to job-control signals: a Ctrl-C or a kill of the agent's group must
  // not take the watchdog down before the agent.
  ::setpgid(0, 0);
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU, SIGUSR1,
                SIGUSR2}) {
    ::sigaction(s, &ign, nullptr);
  }
  ::prctl(PR_SET_NAME, "ddprun-guard");
  // Close everything else, stdio included: holding the agent's stdout would keep whoever reads
  // it waiting for EOF after the agent is gone.
  if (sock > 0) ::close_range(0, static_cast<unsigned>(sock) - 1, 0);
  ::close_range(static_cast<unsigned>(sock) + 1, ~0U, 0);

  static std::array<pid_t, kMaxGroups> groups{};
  size_t count = 0;
  while (true) {
    Record r{};
    const ssize_t n = ::recv(sock, &r, sizeof r, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the agent is gone
    if (n != sizeof r || r.pgid <= 0) continue;
    if (r.op == kAdd && count < kMaxGroups) {
      groups[count++] = r.pgid;
    } else if (r.op == kRemove) {
      for (size_t i = 0; i < count; ++i) {
        if (groups[i] == r.pgid) {
          groups[i] = groups[--count];
          break;
        }
      }
    }
  }
  for (size_t i = 0; i < count; ++i) ::kill(-groups[i], SIGKILL);
  ::_exit(0);
}

}  // namespace

OrphanGuard& OrphanGuard::instance() {
  static OrphanGuard guard;
  if (guard.owner_ != ::getpid()) {
    // A forked copy of the agent: the inherited socket belongs to the parent's watchdog.
    if (guard.socket_ >= 0) ::close(guard.socket_);
    guard.socket_ = -1;
    guard.watchdog_ = -1;
    guard.start();
  }
  return guard;
}

OrphanGuard::OrphanGuard() = default;

void OrphanGuard::start() {
  owner_ = ::getpid();
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) {
    log::get("agent")->warn("orphan guard not started: socketpair: {}", std::strerror(errno));
    return;
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    run_watchdog(fds[1]);
  }
  const int fork_errno = errno;
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    log::get("agent")->warn("orphan guard not started: fork: {}", std::strerror(fork_errno));
    return;
  }
  ::setpgid(pid, pid);  // from this side too, so no Ctrl-C can reach it before it runs
  watchdog_ = pid;
  socket_ = fds[0];
}

void OrphanGuard::send(int op, pid_t pgid) {
  if (socket_ < 0) return;
  const Record r{op, static_cast<int32_t>(pgid)};
  while (::send(socket_, &r, sizeof r, MSG_NOSIGNAL) < 0) {
    if (errno == EINTR) continue;
    log::get("agent")->warn("orphan guard lost ({}): workers may outlive a killed agent",
                            std::strerror(errno));
    ::close(socket_);
    socket_ = -1;
    return;
  }
}

void OrphanGuard::add(pid_t pgid) { send(kAdd, pgid); }

void OrphanGuard::add_self(int socket) noexcept {
  const Record r{kAdd, static_cast<int32_t>(::getpid())};
  while (::send(socket, &r, sizeof r, MSG_NOSIGNAL) < 0 && errno == EINTR) {
  }
}

void OrphanGuard::remove(pid_t pgid) { send(kRemove, pgid); }

}  // namespace ddp::agent
