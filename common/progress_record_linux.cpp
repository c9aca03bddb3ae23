// ProgressRecord's file: the writer's shared mapping and the reader's pread. The record is a
// seqlock: the writer makes the generation odd, writes the fields, makes it even again; a reader
// accepts a copy only when the generation is even and unchanged across two reads.

#include "common/progress_record.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <ctime>

namespace ddp {
namespace {

constexpr std::size_t kGenerationOffset = 8;
constexpr std::size_t kSeqOffset = 16;
constexpr std::size_t kCompletedOffset = 24;
constexpr std::size_t kSinceOffset = 32;
constexpr std::size_t kPidOffset = 40;
constexpr std::size_t kOpOffset = 48;
constexpr std::size_t kOpBytes = 16;
constexpr int kReadAttempts = 5;

template <typename T>
void store(unsigned char* base, std::size_t offset, T value) {
  // The mapping is page-aligned and every field is naturally aligned.
  std::atomic_ref<T>(*reinterpret_cast<T*>(base + offset)).store(value, std::memory_order_release);
}

template <typename T>
T load(const unsigned char* bytes, std::size_t offset) {
  T value;
  std::memcpy(&value, bytes + offset, sizeof(T));
  return value;
}

bool read_whole(int fd, unsigned char* out) {
  return ::pread(fd, out, kProgressRecordBytes, 0) == static_cast<ssize_t>(kProgressRecordBytes);
}

}  // namespace

std::int64_t progress_clock_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::optional<ProgressRecord> read_progress_record(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::optional<ProgressRecord> result;
  unsigned char first[kProgressRecordBytes];
  unsigned char second[kProgressRecordBytes];
  for (int attempt = 0; attempt < kReadAttempts && !result; ++attempt) {
    if (!read_whole(fd, first) || std::memcmp(first, kProgressMagic, 8) != 0) break;
    if (!read_whole(fd, second)) break;
    const auto generation = load<std::uint64_t>(first, kGenerationOffset);
    if (generation % 2 != 0 || std::memcmp(first, second, kProgressRecordBytes) != 0) continue;
    ProgressRecord record;
    record.seq = load<std::uint64_t>(first, kSeqOffset);
    record.completed = load<std::uint64_t>(first, kCompletedOffset);
    record.since_ns = load<std::int64_t>(first, kSinceOffset);
    record.pid = static_cast<pid_t>(load<std::uint32_t>(first, kPidOffset));
    const char* op = reinterpret_cast<const char*>(first + kOpOffset);
    record.op.assign(op, ::strnlen(op, kOpBytes));
    result = std::move(record);
  }
  ::close(fd);
  return result;
}

ProgressWriter::ProgressWriter(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  if (::ftruncate(fd, static_cast<off_t>(kProgressRecordBytes)) == 0) {
    void* map = ::mmap(nullptr, kProgressRecordBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map != MAP_FAILED) mapping_ = static_cast<unsigned char*>(map);
  }
  ::close(fd);  // the mapping keeps the file
  if (mapping_ == nullptr) return;
  store<std::uint32_t>(mapping_, kPidOffset, static_cast<std::uint32_t>(::getpid()));
  store<std::int64_t>(mapping_, kSinceOffset, progress_clock_ns());
  // The magic last: a reader never accepts a record whose fields are not there yet.
  std::memcpy(mapping_, kProgressMagic, sizeof(kProgressMagic));
}

ProgressWriter::~ProgressWriter() {
  if (mapping_ != nullptr) ::munmap(mapping_, kProgressRecordBytes);
}

void ProgressWriter::on_issue(const char* op) { publish(op, true); }
void ProgressWriter::on_complete() { publish(nullptr, false); }

void ProgressWriter::publish(const char* op, bool issued) {
  if (mapping_ == nullptr) return;
  std::lock_guard lock(mutex_);
  store<std::uint64_t>(mapping_, kGenerationOffset, ++generation_);  // odd: updating
  if (issued) {
    store<std::uint64_t>(mapping_, kSeqOffset, ++seq_);
    char name[kOpBytes] = {};
    std::strncpy(name, op, kOpBytes - 1);
    for (std::size_t i = 0; i < kOpBytes; i += 8) {
      std::uint64_t word;
      std::memcpy(&word, name + i, 8);
      store<std::uint64_t>(mapping_, kOpOffset + i, word);
    }
  } else {
    store<std::uint64_t>(mapping_, kCompletedOffset, ++completed_);
  }
  store<std::int64_t>(mapping_, kSinceOffset, progress_clock_ns());
  store<std::uint64_t>(mapping_, kGenerationOffset, ++generation_);  // even: whole
}

}  // namespace ddp
