#pragma once
// FileTimerServer: torchrun's TORCHELASTIC_ENABLE_FILE_TIMER=1 watchdog on the agent's loop. It
// creates the named pipe that workers' torch.distributed.elastic.timer.FileTimerClient write to
// (TORCHELASTIC_TIMER_FILE, passed to the workers), keeps their timers (FileTimers) and sends a
// worker its timer's signal (SIGKILL by default) once the timer expires; the agent then sees an
// ordinary worker failure. Lives for the whole run; agent thread only.

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace ddp::agent {

inline constexpr const char* kEnableFileTimerEnv = "TORCHELASTIC_ENABLE_FILE_TIMER";
inline constexpr const char* kTimerFileEnv = "TORCHELASTIC_TIMER_FILE";

class FileTimerServer {
 public:
  // Creates the FIFO at `path` (mode 0600; an existing file there is removed first, as torchrun
  // does) and starts reading it once the loop runs. Throws IoError naming the path.
  FileTimerServer(boost::asio::io_context& io, std::string path);
  ~FileTimerServer();  // removes the FIFO
  FileTimerServer(const FileTimerServer&) = delete;
  FileTimerServer& operator=(const FileTimerServer&) = delete;

  const std::string& path() const;
  // Seconds since the epoch of the watchdog's last pass (a request read, a timer checked; at
  // least every second): what the health check answers with, as torchrun's
  // get_last_progress_time.
  std::int64_t last_progress_time() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// TORCHELASTIC_ENABLE_FILE_TIMER=1 in `env`: starts the server on TORCHELASTIC_TIMER_FILE, or on
// <TMPDIR or /tmp>/watchdog_timer_<uuid4> when that is unset, and sets TORCHELASTIC_TIMER_FILE in
// `env` (ddprun's environment, which the workers inherit). nullptr when the variable is not "1".
std::unique_ptr<FileTimerServer> make_file_timer_server(boost::asio::io_context& io,
                                                        std::map<std::string, std::string>& env);

}  // namespace ddp::agent
