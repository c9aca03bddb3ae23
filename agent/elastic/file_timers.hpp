#pragma once
// FileTimers: the timer table of torchrun's FileTimerServer, without I/O. Workers'
// torch.distributed.elastic.timer.FileTimerClient writes one JSON request a line
// ({"version": 1, "pid", "scope_id", "expiration_time" (wall-clock seconds, negative to release),
// "signal"}); a timer whose expiration passes gets its process the signal. Agent thread only.

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ddp::agent {

struct FileTimerRequest {
  pid_t pid = 0;
  std::string scope_id;
  double expiration_time = 0;  // seconds since the epoch; < 0 releases the timer
  int signal = 0;              // 0 or less: report the expiry, send nothing
};

// Parses one request line. nullopt for anything that is not such an object (the caller logs it).
std::optional<FileTimerRequest> parse_file_timer_request(std::string_view line);

// What to do about one process whose timers expired.
struct TimerExpiry {
  pid_t pid = 0;
  std::vector<std::string> scopes;  // every expired scope, in expiration order
  int signal = 0;                   // the first expired timer's signal > 0 in that order; 0: none
};

class FileTimers {
 public:
  // Sets the timer (pid, scope_id), or removes it when expiration_time < 0.
  void apply(const FileTimerRequest& request);

  // Removes and returns the processes with a timer expired at `now` (epoch seconds): all of a
  // process's timers go with it, as torchrun clears a reaped worker's timers.
  std::vector<TimerExpiry> take_expired(double now);

  // Drops the timers of processes for which `is_running(pid)` is false.
  template <typename IsRunning>
  void forget_gone(IsRunning&& is_running) {
    std::erase_if(timers_, [&](const auto& entry) { return !is_running(entry.first.first); });
  }

  // The earliest expiration time; nullopt when no timer is set.
  std::optional<double> next_expiration() const;
  std::size_t size() const { return timers_.size(); }

 private:
  std::map<std::pair<pid_t, std::string>, FileTimerRequest> timers_;
};

}  // namespace ddp::agent
