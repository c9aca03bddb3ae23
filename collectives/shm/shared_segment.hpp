#pragma once
// SharedSegment: a named POSIX shared-memory region (shm_open + mmap), mapped read-write. The rank
// that creates a segment unlinks its name once every peer has mapped it, so nothing stays in
// /dev/shm after the job; the mapping lives until the object is destroyed.

#include <cstddef>
#include <string>

namespace ddp::coll::shm {

// Which processes can map this one's segments and watch each other's pids: the boot id with the
// mount, network and pid namespaces ("<boot id>/mnt:[...]/net:[...]/pid:[...]"). Ranks in
// separate network namespaces are treated as separate hosts even on one machine, so that they
// talk over their network as they would across machines; ranks in separate pid namespaces could
// not tell whether a peer's pid is alive.
std::string shared_memory_domain();

class SharedSegment {
 public:
  // Creates a new segment of `bytes` under `name` ("/ddp-..."); throws IoError naming it.
  static SharedSegment create(const std::string& name, std::size_t bytes);
  // Maps a peer's existing segment; throws IoError naming it (missing, or smaller than `bytes`).
  static SharedSegment open(const std::string& name, std::size_t bytes);

  SharedSegment() = default;
  SharedSegment(SharedSegment&& other) noexcept;
  SharedSegment& operator=(SharedSegment&& other) noexcept;
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;
  ~SharedSegment();

  // Removes the name (the creator calls it once every peer has mapped the segment).
  void unlink();

  std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  const std::string& name() const { return name_; }

 private:
  SharedSegment(std::string name, std::byte* data, std::size_t size, bool owner)
      : name_(std::move(name)), data_(data), size_(size), owner_(owner) {}
  void release();

  std::string name_;
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  bool owner_ = false;  // created here and not unlinked yet
};

}  // namespace ddp::coll::shm
