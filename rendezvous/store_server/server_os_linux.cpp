// Linux specifics of the store server: setrlimit, /proc/sys/net/core/somaxconn, and mapping a
// listening port to its process through /proc/net/tcp{,6} (socket inode) and /proc/<pid>/fd.

#include "common/parse_number.hpp"
#include "rendezvous/store_server/server_os.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace ddp::rdzv {
namespace {

// Inodes of sockets listening (state 0A) on `port` in one /proc/net/tcp* table.
void listening_inodes(const char* table, std::uint16_t port, std::set<std::string>& inodes) {
  std::ifstream in(table);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
    fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >>
        timeout >> inode;
    const auto colon = local.rfind(':');
    if (colon == std::string::npos || state != "0A") continue;
    if (parse_number<unsigned>(local.substr(colon + 1), 16) == port) inodes.insert(inode);
  }
}

std::string process_name(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

}  // namespace

std::uint64_t raise_fd_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) return raised.rlim_cur;
  }
  return limit.rlim_cur;
}

int listen_backlog() {
  int system_max = 0;
  std::ifstream in("/proc/sys/net/core/somaxconn");
  in >> system_max;
  return std::max(SOMAXCONN, system_max);
}

std::string describe_port_owner(std::uint16_t port) {
  std::set<std::string> inodes;
  listening_inodes("/proc/net/tcp", port, inodes);
  listening_inodes("/proc/net/tcp6", port, inodes);
  if (inodes.empty()) return "";
  namespace fs = std::filesystem;
  std::error_code ec;
  try {
  for (const auto& proc : fs::directory_iterator("/proc", ec)) {
    const std::string pid = proc.path().filename();
    if (pid.empty() || !std::all_of(pid.begin(), pid.end(), ::isdigit)) continue;
    std::error_code fd_ec;
    for (const auto& fd : fs::directory_iterator(proc.path() / "fd", fd_ec)) {
      std::error_code link_ec;
      const std::string target = fs::read_symlink(fd.path(), link_ec);
      if (link_ec || target.rfind("socket:[", 0) != 0) continue;
      if (inodes.count(target.substr(8, target.size() - 9)) != 0) {
        return "pid " + pid + " (" + process_name(pid) + ")";
      }
    }
  }
  } catch (const fs::filesystem_error&) {
    // a process went away while we looked: report what is known
  }
  return "";
}

void set_keepalive(int fd, std::chrono::seconds within) {
  const int total = static_cast<int>(within.count());
  if (total <= 0) return;
  const int on = 1;
  const int idle = std::max(1, total / 2);
  const int interval = std::max(1, total / 8);
  const int count = std::max(1, (total - idle) / interval);
  const unsigned user_timeout_ms = static_cast<unsigned>(total) * 1000U;
  // Best effort: a socket that refuses an option is still served.
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
  // Keepalive is not sent while output is unacknowledged; this bounds that case too.
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof user_timeout_ms);
}

SpareDescriptor::SpareDescriptor() : fd_(::open("/dev/null", O_RDONLY | O_CLOEXEC)) {}

SpareDescriptor::~SpareDescriptor() = default;

bool SpareDescriptor::refuse_one(int listen_fd) {
  if (!fd_) {
    fd_.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    return false;
  }
  fd_.reset();
  // The listening socket is non-blocking (Asio made it so): nothing pending answers EAGAIN.
  UniqueFd pending(::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
  const bool refused = static_cast<bool>(pending);
  pending.reset();  // closed before the spare takes its slot back
  fd_.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  return refused;
}

}  // namespace ddp::rdzv
