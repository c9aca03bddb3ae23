#pragma once
// UniqueFd: the one owner of a file descriptor; closes it when destroyed or reset. Move-only.
// Not for the child's path between clone and exec (process_spawner_linux.cpp): that stays raw.

#include <utility>

namespace ddp {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  // The descriptor, still owned here; -1 when empty.
  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }

  // Gives the descriptor up without closing it; this becomes empty.
  int release() noexcept { return std::exchange(fd_, -1); }

  // Closes the descriptor held (errors ignored: the descriptor is gone either way) and takes `fd`.
  void reset(int fd = -1) noexcept;

 private:
  int fd_ = -1;
};

}  // namespace ddp
