// SharedSegment over shm_open/posix_fallocate/mmap. The pages are reserved at creation, so a
// /dev/shm that is too small fails the set-up (and the group falls back to TCP) instead of a
// collective.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "collectives/shm/shared_segment.hpp"
#include "common/unique_fd.hpp"
#include "ddp/error.hpp"

namespace ddp::coll::shm {
namespace {

[[noreturn]] void fail(const char* what, const std::string& name, int error) {
  throw IoError(fmt::format("shared memory {} {}: {}", what, name, std::strerror(error)));
}

std::byte* map(int fd, const std::string& name, std::size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) fail("mmap", name, errno);
  return static_cast<std::byte*>(p);
}

std::string read_link(const char* path) {
  char buffer[256];
  const ssize_t n = ::readlink(path, buffer, sizeof buffer);
  return n > 0 ? std::string(buffer, static_cast<std::size_t>(n)) : std::string("?");
}

}  // namespace

std::string shared_memory_domain() {
  std::string boot_id;
  if (std::FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
    char line[64] = {};
    if (std::fgets(line, sizeof line, f) != nullptr) boot_id = line;
    std::fclose(f);
  }
  while (!boot_id.empty() && (boot_id.back() == '\n' || boot_id.back() == ' ')) boot_id.pop_back();
  return fmt::format("{}/{}/{}/{}", boot_id.empty() ? "?" : boot_id, read_link("/proc/self/ns/mnt"),
                     read_link("/proc/self/ns/net"), read_link("/proc/self/ns/pid"));
}

SharedSegment SharedSegment::create(const std::string& name, std::size_t bytes) {
  const UniqueFd fd(::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600));
  if (!fd) fail("create", name, errno);
  // Reserve the pages now: on a full tmpfs (a container's 64 MB /dev/shm) a sparse segment would
  // fail later, with SIGBUS at the first touch in the middle of a collective.
  if (const int error = ::posix_fallocate(fd.get(), 0, static_cast<off_t>(bytes)); error != 0) {
    ::shm_unlink(name.c_str());
    throw IoError(fmt::format("shared memory reserve {} bytes for {}: {} (is /dev/shm too small?)",
                              bytes, name, std::strerror(error)));
  }
  std::byte* data = nullptr;
  try {
    data = map(fd.get(), name, bytes);
  } catch (...) {
    ::shm_unlink(name.c_str());
    throw;
  }
  return SharedSegment(name, data, bytes, true);  // the mapping outlives the descriptor
}

SharedSegment SharedSegment::open(const std::string& name, std::size_t bytes) {
  const UniqueFd fd(::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0));
  if (!fd) fail("open", name, errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || static_cast<std::size_t>(st.st_size) < bytes) {
    throw IoError(fmt::format("shared memory {} holds {} bytes, not {}", name, st.st_size, bytes));
  }
  return SharedSegment(name, map(fd.get(), name, bytes), bytes, false);
}

SharedSegment::SharedSegment(SharedSegment&& other) noexcept
    : name_(std::move(other.name_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      owner_(std::exchange(other.owner_, false)) {}

SharedSegment& SharedSegment::operator=(SharedSegment&& other) noexcept {
  if (this != &other) {
    release();
    name_ = std::move(other.name_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    owner_ = std::exchange(other.owner_, false);
  }
  return *this;
}

SharedSegment::~SharedSegment() { release(); }

void SharedSegment::unlink() {
  if (owner_) ::shm_unlink(name_.c_str());
  owner_ = false;
}

void SharedSegment::release() {
  unlink();
  if (data_ != nullptr) ::munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace ddp::coll::shm
