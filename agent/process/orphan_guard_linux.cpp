// Starting the orphan guard's watchdog: the static `ddprun-guard` helper beside the executable,
// started vfork-style (about a millisecond, and the agent's memory is never shared
// copy-on-write), or, without the helper, a forked copy of the agent running the same loop
// (orphan_watchdog_linux.cpp).

#include "agent/process/orphan_guard.hpp"

#include <fmt/format.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/process/orphan_watchdog.hpp"
#include "agent/process/process_spawner.hpp"
#include "common/log.hpp"
#include "ddp/error.hpp"

namespace ddp::agent {
namespace {

using watchdog::kAdd;
using watchdog::kRemove;
using watchdog::Record;

constexpr const char* kHelperName = "ddprun-guard";

// The static helper beside this executable, or DDPRUN_GUARD's path; empty for the fork fallback
// (DDPRUN_GUARD=fork, or no helper there).
std::string helper_path() {
  if (const char* chosen = std::getenv("DDPRUN_GUARD")) {
    return std::string_view(chosen) == "fork" ? std::string() : std::string(chosen);
  }
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  const auto helper = self.parent_path() / kHelperName;
  return is_executable_file(helper.string()) ? helper.string() : std::string();
}

// Starts the helper on `socket` (vfork-style, like a worker, but in no danger from the agent's
// death); its pid, or -1 (with the reason in `why`) when it did not exec.
pid_t start_helper(const std::string& helper, int socket, std::string& why) {
  try {
    const std::vector<std::string> argv{helper, std::to_string(socket)};
    ForkedChild child(ExecImage(argv, {}),
                      ChildSetup{.dies_with_agent = false, .pass_fd = socket});
    const int error = child.await_exec();
    if (error == 0) return child.pid();
    reap_process(child.pid(), true);
    why = fmt::format("{}: {}", helper, std::strerror(error));
  } catch (const IoError& e) {
    why = e.what();
  }
  return -1;
}

}  // namespace

OrphanGuard& OrphanGuard::instance() {
  static OrphanGuard guard;
  if (guard.owner_ != ::getpid()) {
    // A forked copy of the agent: the inherited socket belongs to the parent's watchdog.
    guard.socket_.reset();
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
  UniqueFd ours(fds[0]);
  UniqueFd theirs(fds[1]);
  std::string why;
  const std::string helper = helper_path();
  pid_t pid = helper.empty() ? -1 : start_helper(helper, theirs.get(), why);
  if (pid < 0) {
    if (!helper.empty()) {
      log::get("agent")->debug("orphan guard helper not started ({}); forking one", why);
    }
    pid = ::fork();
    if (pid == 0) {
      ours.reset();
      watchdog::run(theirs.get());
    }
  }
  const int fork_errno = errno;
  theirs.reset();
  if (pid < 0) {
    log::get("agent")->warn("orphan guard not started: fork: {}", std::strerror(fork_errno));
    return;
  }
  ::setpgid(pid, pid);  // from this side too, so no Ctrl-C can reach it before it runs
  watchdog_ = pid;
  socket_ = std::move(ours);
}

void OrphanGuard::send(int op, pid_t pgid) {
  if (!socket_) return;
  const Record r{op, static_cast<int32_t>(pgid)};
  while (::send(socket_.get(), &r, sizeof r, MSG_NOSIGNAL) < 0) {
    if (errno == EINTR) continue;
    log::get("agent")->warn("orphan guard lost ({}): workers may outlive a killed agent",
                            std::strerror(errno));
    socket_.reset();
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
