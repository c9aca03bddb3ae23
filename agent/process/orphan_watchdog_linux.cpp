// The watchdog loop: a fixed table of process groups filled from SOCK_SEQPACKET records. A
// socket, not a pipe, so that the agent's send() can use MSG_NOSIGNAL and never dies of SIGPIPE
// if the watchdog is gone.

#include "agent/process/orphan_watchdog.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstddef>

namespace ddp::agent::watchdog {
namespace {

constexpr std::size_t kMaxGroups = 4096;

}  // namespace

void run(int sock) {
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
  std::size_t count = 0;
  while (true) {
    Record r{};
    const ssize_t n = ::recv(sock, &r, sizeof r, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the agent is gone
    if (n != sizeof r || r.pgid <= 0) continue;
    if (r.op == kAdd && count < kMaxGroups) {
      groups[count++] = r.pgid;
    } else if (r.op == kRemove) {
      for (std::size_t i = 0; i < count; ++i) {
        if (groups[i] == r.pgid) {
          groups[i] = groups[--count];
          break;
        }
      }
    }
  }
  for (std::size_t i = 0; i < count; ++i) ::kill(-groups[i], SIGKILL);
  ::_exit(0);
}

}  // namespace ddp::agent::watchdog
