// UniqueFd's close: the one raw ::close behind every owned descriptor.

#include "common/unique_fd.hpp"

#include <unistd.h>

namespace ddp {

void UniqueFd::reset(int fd) noexcept {
  const int old = std::exchange(fd_, fd);
  // Never retried on EINTR: Linux has released the descriptor already, and a retry could close
  // one another thread just opened.
  if (old >= 0 && old != fd) ::close(old);
}

}  // namespace ddp
