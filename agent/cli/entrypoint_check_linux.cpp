// find_python_module: one short-lived interpreter, spawned with posix_spawnp and awaited through a
// pidfd with a deadline. It runs before the agent's io_context exists, so blocking here is fine.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "agent/cli/entrypoint_check.hpp"
#include "common/unique_fd.hpp"

namespace ddp::agent {
namespace {

// Exit 0: found; 3: missing; anything else (an exception, a broken interpreter): unknown. A
// package runs as <package>.__main__, so a package needs that submodule too, as `python -m` does.
constexpr const char* kFinder = R"(import sys
from importlib import machinery, util
def find(name):
    parts = name.split('.')
    spec = util.find_spec(parts[0])
    for part in parts[1:]:
        if spec is None or spec.submodule_search_locations is None:
            return None
        spec = machinery.PathFinder.find_spec(part, list(spec.submodule_search_locations))
    return spec
spec = find(sys.argv[1])
if spec is not None and spec.submodule_search_locations is not None:
    spec = find(sys.argv[1] + '.__main__')
sys.exit(0 if spec is not None else 3)
)";
constexpr int kMissingExit = 3;

// Waits for `pid` until `timeout`; SIGKILLs it past the deadline. Returns the wait status, or -1
// when it had to be killed.
int wait_with_deadline(pid_t pid, std::chrono::milliseconds timeout) {
  const UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (pidfd) {
    pollfd entry{.fd = pidfd.get(), .events = POLLIN, .revents = 0};
    int ready = 0;
    do {
      ready = ::poll(&entry, 1, static_cast<int>(timeout.count()));
    } while (ready < 0 && errno == EINTR);
    if (ready == 0) ::kill(pid, SIGKILL);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL ? -1 : status;
}

}  // namespace

ModuleLookup find_python_module(const std::string& python, const std::string& module,
                                const std::map<std::string, std::string>& env,
                                std::chrono::milliseconds timeout) {
  std::vector<std::string> env_strings;
  for (const auto& [key, value] : env) env_strings.push_back(key + "=" + value);
  std::vector<char*> envp;
  for (auto& entry : env_strings) envp.push_back(entry.data());
  envp.push_back(nullptr);
  std::string program = python;
  std::string dash_c = "-c";
  std::string finder = kFinder;
  std::string name = module;
  char* argv[] = {program.data(), dash_c.data(), finder.data(), name.data(), nullptr};

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int error = ::posix_spawnp(&pid, program.c_str(), &actions, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) return ModuleLookup::kUnknown;
  const int status = wait_with_deadline(pid, timeout);
  if (status < 0 || !WIFEXITED(status)) return ModuleLookup::kUnknown;
  if (WEXITSTATUS(status) == 0) return ModuleLookup::kFound;
  return WEXITSTATUS(status) == kMissingExit ? ModuleLookup::kMissing : ModuleLookup::kUnknown;
}

}  // namespace ddp::agent
