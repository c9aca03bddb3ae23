#pragma once
// What the store server asks of the operating system: more file descriptors, the listen backlog,
// and who holds a port it could not bind (Linux, from /proc).

#include <cstdint>
#include <string>

namespace ddp::rdzv {

// Raises the soft RLIMIT_NOFILE to the hard limit; returns the soft limit now in force.
std::uint64_t raise_fd_limit();

// The listen backlog: SOMAXCONN or net.core.somaxconn, whichever is larger.
int listen_backlog();

// "pid 1234 (python3)" for the process with a TCP socket listening on port, "" when /proc does not
// tell (another user's process, or the port is held without listening).
std::string describe_port_owner(std::uint16_t port);

}  // namespace ddp::rdzv
