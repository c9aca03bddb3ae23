// pipe2, open, write and poll for OutputRouter. The console wait polls for POLLOUT up to a
// deadline instead of blocking, so a console nobody reads never stalls the agent's loop.
#include "agent/process/output_fds.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "ddp/error.hpp"

namespace ddp::agent {

int make_output_pipe(UniqueFd& write_end) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw IoError(fmt::format("cannot create a worker output pipe: {}", std::strerror(errno)));
  }
  write_end.reset(fds[1]);
  return fds[0];
}

UniqueFd open_worker_log(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644));
  if (!fd) {
    const int error = errno;
    throw IoError(fmt::format("cannot open worker log file {}: {}", path, std::strerror(error)));
  }
  return fd;
}

WriteResult write_all(int fd, std::string_view& data, std::chrono::milliseconds wait_for_room) {
  const auto deadline = std::chrono::steady_clock::now() + wait_for_room;
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n >= 0) {
      data.remove_prefix(static_cast<size_t>(n));
    } else if (errno == EAGAIN) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return WriteResult::kFull;
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, static_cast<int>(left.count()));
    } else if (errno != EINTR) {
      return WriteResult::kGone;
    }
  }
  return WriteResult::kWritten;
}

}  // namespace ddp::agent
