#pragma once
// ProgressRecord: what a libddp worker publishes about its collectives, in one small file per rank
// that its agent (the hang detector, metrics) reads without talking to the worker. The worker
// writes through a shared mapping (ProgressWriter); readers call read_progress_record(path).
//
// File format (little-endian, 64 bytes, fixed offsets), version 1:
//   0  char[8]  magic "DDPPROG1"
//   8  u64      generation: odd while the writer is updating, even when the record is whole
//   16 u64      seq: collectives issued so far (the number of the last one issued)
//   24 u64      completed: collectives whose wait() has returned
//   32 i64      since_ns: CLOCK_MONOTONIC when seq or completed last changed (this machine only)
//   40 u32      pid of the writer
//   44 u32      reserved (0)
//   48 char[16] op: the last issued collective's name, NUL-padded ("all_reduce", "barrier", ...)

#include <sys/types.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

namespace ddp {

inline constexpr char kProgressMagic[8] = {'D', 'D', 'P', 'P', 'R', 'O', 'G', '1'};
inline constexpr std::size_t kProgressRecordBytes = 64;
// The environment variable through which ddprun tells a worker where to publish its record.
inline constexpr const char* kProgressFileEnv = "DDPRUN_PROGRESS_FILE";

struct ProgressRecord {
  std::uint64_t seq = 0;
  std::uint64_t completed = 0;
  std::int64_t since_ns = 0;  // CLOCK_MONOTONIC (= std::chrono::steady_clock on Linux)
  pid_t pid = 0;
  std::string op;

  // True while some issued collective has not completed: the rank waits in `op` #seq.
  bool in_collective() const { return completed < seq; }
};

// Reads the record at `path`. Returns nullopt when the file is missing, short, not a progress
// record, or still torn after a few retries (a writer mid-update). Never throws; cheap (a few
// pread calls): safe to call every tick for every rank.
std::optional<ProgressRecord> read_progress_record(const std::string& path);

// The monotonic clock the records use, in nanoseconds.
std::int64_t progress_clock_ns();

// The writing side, owned by one worker. Thread-safe (a mutex per update; uncontended in
// practice, ~tens of ns). A writer that could not open its file does nothing.
class ProgressWriter {
 public:
  // Creates (truncates) `path`, sizes it and maps it shared. Throws nothing: on failure the
  // writer is inert (is_open() false), since progress is diagnostics, never a reason to fail.
  explicit ProgressWriter(const std::string& path);
  ~ProgressWriter();
  ProgressWriter(const ProgressWriter&) = delete;
  ProgressWriter& operator=(const ProgressWriter&) = delete;

  bool is_open() const { return mapping_ != nullptr; }
  void on_issue(const char* op);  // seq += 1, op, since = now
  void on_complete();             // completed += 1, since = now

 private:
  void publish(const char* op, bool issued);
  std::mutex mutex_;
  unsigned char* mapping_ = nullptr;
  std::uint64_t seq_ = 0;
  std::uint64_t completed_ = 0;
  std::uint64_t generation_ = 0;
};

}  // namespace ddp
