#pragma once
// OomWatch: did the OOM killer strike? Reads the oom_kill counter of this process's memory
// cgroup (v2 memory.events, else v1 memory.oom_control, else the system-wide /proc/vmstat) when
// a group starts and again when a worker dies of SIGKILL; a rise marks the death as a likely OOM
// kill. Blocking file reads of a few hundred bytes, on the agent's thread.

#include <cstdint>
#include <optional>
#include <string>

namespace ddp::agent {

class OomWatch {
 public:
  // Finds the counter file; `proc_root` is "/proc" except in tests.
  explicit OomWatch(const std::string& proc_root = "/proc");

  // The counter file in use ("" when none was found).
  const std::string& counter_path() const { return path_; }

  // The current count, or nullopt when it cannot be read.
  std::optional<uint64_t> read() const;

  // Remembers the current count as the baseline.
  void mark();

  // True when the count is above the baseline.
  bool rose_since_mark() const;

 private:
  std::string path_;
  std::optional<uint64_t> baseline_;
};

// The "oom_kill N" value in the text of memory.events, memory.oom_control or vmstat.
std::optional<uint64_t> parse_oom_kill_count(const std::string& text);

}  // namespace ddp::agent
