#pragma once
// What the store server asks of the operating system: more file descriptors, the listen backlog,
// TCP keepalive, a spare descriptor for EMFILE, and who holds a port it could not bind (Linux).

#include <chrono>
#include <cstdint>
#include <string>

#include "common/unique_fd.hpp"

namespace ddp::rdzv {

// Raises the soft RLIMIT_NOFILE to the hard limit; returns the soft limit now in force.
std::uint64_t raise_fd_limit();

// The listen backlog: SOMAXCONN or net.core.somaxconn, whichever is larger.
int listen_backlog();

// "pid 1234 (python3)" for the process with a TCP socket listening on port, "" when /proc does not
// tell (another user's process, or the port is held without listening).
std::string describe_port_owner(std::uint16_t port);

// Makes an accepted socket notice a peer gone without a FIN (link cut, host lost) within about
// `within`: keepalive probes after within/2 of silence, then every within/8 (at least 1 s), and
// TCP_USER_TIMEOUT `within` for output the peer never acknowledges. Zero leaves the socket as it
// is.
void set_keepalive(int fd, std::chrono::seconds within);

// The spare-descriptor trick for EMFILE: one descriptor held in reserve, so that at the limit the
// server can still take a pending connection off the backlog and close it, instead of leaving it
// there to wake the acceptor again at once. One thread.
class SpareDescriptor {
 public:
  SpareDescriptor();
  ~SpareDescriptor();
  SpareDescriptor(const SpareDescriptor&) = delete;
  SpareDescriptor& operator=(const SpareDescriptor&) = delete;

  // Frees the spare, accepts one pending connection of `listen_fd` and closes it, then takes the
  // spare again. False when nothing was pending or the spare could not be used (then pause).
  bool refuse_one(int listen_fd);

 private:
  UniqueFd fd_;
};

}  // namespace ddp::rdzv
