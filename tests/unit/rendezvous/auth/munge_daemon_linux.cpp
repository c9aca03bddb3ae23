// munged without --foreground forks and its parent exits once the daemon listens, so waiting
// for the parent is waiting for the socket: no polling. --force lets it run as root.

#include "tests/unit/rendezvous/auth/munge_daemon.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

#include "rendezvous/auth/hmac.hpp"

namespace ddp::rdzv::test {
namespace {

// Runs /usr/sbin/munged with `args` and waits for it; true when it exited 0.
bool run_munged(std::vector<std::string> args) {
  args.insert(args.begin(), "/usr/sbin/munged");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

MungeDaemon::MungeDaemon() {
  if (::geteuid() != 0) {
    why_not_ = "munged needs root for a key of its own";
    return;
  }
  if (::access("/usr/sbin/munged", X_OK) != 0) {
    why_not_ = "no /usr/sbin/munged (apt-get install munge)";
    return;
  }
  char pattern[] = "/tmp/ddp-munge-XXXXXX";
  if (::mkdtemp(pattern) == nullptr) {
    why_not_ = "mkdtemp failed";
    return;
  }
  dir_ = pattern;
  ::chmod(dir_.c_str(), 0755);  // other users' processes reach the socket (another-uid tests)
  socket_ = dir_ + "/munge.socket";
  const std::string key = dir_ + "/munge.key";
  {
    const auto bytes = auth::random_bytes(1024);
    std::ofstream out(key, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  ::chmod(key.c_str(), 0600);
  running_ = run_munged({"--force", "--socket=" + socket_, "--key-file=" + key,
                         "--pid-file=" + dir_ + "/munged.pid",
                         "--seed-file=" + dir_ + "/munged.seed",
                         "--log-file=" + dir_ + "/munged.log"});
  if (!running_) why_not_ = "munged did not start; see " + dir_ + "/munged.log";
}

MungeDaemon::~MungeDaemon() {
  if (dir_.empty()) return;
  // SIGTERM, then wait for the exit on a pidfd (munged --stop polls for it once a second);
  // SIGKILL when it has not gone within 5 s, so no munged outlives its test.
  std::ifstream pid_file(dir_ + "/munged.pid");
  pid_t pid = 0;
  if (running_ && pid_file >> pid && pid > 0) {
    const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    ::kill(pid, SIGTERM);
    if (pidfd >= 0) {
      pollfd exited{pidfd, POLLIN, 0};
      if (::poll(&exited, 1, 5000) != 1) {
        ::kill(pid, SIGKILL);
        ::poll(&exited, 1, 5000);
      }
      ::close(pidfd);
    } else {
      ::kill(pid, SIGKILL);
    }
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

bool require_munge(const MungeDaemon& daemon) {
  if (daemon.is_running()) return true;
  const char* require_all = std::getenv("DDP_REQUIRE_ALL");
  REQUIRE_FALSE((require_all != nullptr && std::string(require_all) == "1"));
  WARN("skipped: " << daemon.why_not());
  return false;
}

}  // namespace ddp::rdzv::test
