// FileTimerServer on Linux: mkfifo, a non-blocking read end watched by the loop, and kill(2).
// The server also holds a write end of its own pipe: without a writer, a FIFO reads as EOF
// (readable at once, forever) between two clients, which would spin the loop; with it, the read
// end is readable only when a client has written.

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "agent/cli/uuid4.hpp"
#include "agent/core/signal_names.hpp"
#include "agent/elastic/file_timer_server.hpp"
#include "agent/elastic/file_timers.hpp"
#include "agent/process/line_splitter.hpp"
#include "common/log.hpp"
#include "common/unique_fd.hpp"
#include "ddp/error.hpp"

namespace ddp::agent {
namespace asio = boost::asio;

namespace {

// The longest the watchdog sleeps between passes, so the progress time stays fresh.
constexpr auto kMaxInterval = std::chrono::seconds(1);

double wall_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

bool is_running(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

}  // namespace

struct FileTimerServer::State : std::enable_shared_from_this<FileTimerServer::State> {
  State(asio::io_context& io, std::string fifo_path)
      : path(std::move(fifo_path)), pipe(io), timer(io) {}

  std::string path;
  UniqueFd keeper;  // our own write end (see the file comment)
  asio::posix::stream_descriptor pipe;
  asio::steady_timer timer;
  FileTimers timers;
  LineSplitter splitter{4096};  // requests are at most PIPE_BUF bytes
  std::int64_t last_progress = 0;
  bool closed = false;
  char buffer[4096] = {};

  void open() {
    ::unlink(path.c_str());
    if (::mkfifo(path.c_str(), 0600) != 0) {
      throw IoError(fmt::format("{}: cannot create the timer pipe {}: {}", kTimerFileEnv, path,
                                std::strerror(errno)));
    }
    const int read_fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    keeper.reset(::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));
    if (read_fd < 0 || !keeper) {
      const int error = errno;
      if (read_fd >= 0) ::close(read_fd);
      ::unlink(path.c_str());
      throw IoError(fmt::format("{}: cannot open the timer pipe {}: {}", kTimerFileEnv, path,
                                std::strerror(error)));
    }
    pipe.assign(read_fd);
    last_progress = static_cast<std::int64_t>(wall_now());
  }

  void arm_read() {
    pipe.async_wait(asio::posix::descriptor_base::wait_read,
                    [self = shared_from_this()](boost::system::error_code ec) {
                      if (ec || self->closed) return;
                      self->read_requests();
                      self->check();
                      self->arm_read();
                    });
  }

  void read_requests() {
    for (;;) {
      const ssize_t n = ::read(pipe.native_handle(), buffer, sizeof(buffer));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // EAGAIN: all read (EOF cannot happen while keeper is open)
      splitter.feed(std::string_view(buffer, static_cast<std::size_t>(n)),
                    [this](std::string_view line) { take(line); });
    }
  }

  void take(std::string_view line) {
    if (const auto request = parse_file_timer_request(line)) {
      timers.apply(*request);
      log::get("agent")->debug("file timer request pid={} scope={} expiration_time={} signal={}",
                               request->pid, request->scope_id, request->expiration_time,
                               request->signal);
    } else {
      log::get("agent")->warn("file timer: ignoring a malformed request on {}: {}", path, line);
    }
  }

  // One watchdog pass: signal the processes whose timers expired, forget processes that are
  // gone, then sleep until the next expiration (at most kMaxInterval).
  void check() {
    const double now = wall_now();
    last_progress = static_cast<std::int64_t>(now);
    for (const TimerExpiry& expiry : timers.take_expired(now)) reap(expiry);
    timers.forget_gone(is_running);
    const auto next = timers.next_expiration();
    auto delay = std::chrono::duration_cast<std::chrono::steady_clock::duration>(kMaxInterval);
    if (next) {
      const auto until = std::chrono::duration<double>(std::max(0.0, *next - now));
      delay =
          std::min(delay, std::chrono::duration_cast<std::chrono::steady_clock::duration>(until));
    }
    timer.expires_after(delay);
    timer.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec && !self->closed) self->check();
    });
  }

  void reap(const TimerExpiry& expiry) {
    const std::string scopes = fmt::format("{}", fmt::join(expiry.scopes, ","));
    if (expiry.signal <= 0) {
      log::get("agent")->warn("file timer expired pid={} scopes={}; no signal requested",
                              expiry.pid, scopes);
      return;
    }
    log::get("agent")->warn("file timer expired pid={} scopes={}; sending {}", expiry.pid, scopes,
                            signal_name(expiry.signal));
    if (::kill(expiry.pid, expiry.signal) != 0 && errno != ESRCH) {
      log::get("agent")->error("file timer: cannot signal pid={}: {}", expiry.pid,
                               std::strerror(errno));
    }
  }
};

FileTimerServer::FileTimerServer(asio::io_context& io, std::string path)
    : state_(std::make_shared<State>(io, std::move(path))) {
  state_->open();
  state_->arm_read();
  state_->check();
}

FileTimerServer::~FileTimerServer() {
  state_->closed = true;
  boost::system::error_code ignored;
  state_->timer.cancel();
  state_->pipe.close(ignored);
  ::unlink(state_->path.c_str());
}

const std::string& FileTimerServer::path() const { return state_->path; }

std::int64_t FileTimerServer::last_progress_time() const { return state_->last_progress; }

std::unique_ptr<FileTimerServer> make_file_timer_server(asio::io_context& io,
                                                        std::map<std::string, std::string>& env) {
  const auto enabled = env.find(kEnableFileTimerEnv);
  if (enabled == env.end() || enabled->second != "1") return nullptr;  // torchrun: exactly "1"
  std::string path;
  if (const auto given = env.find(kTimerFileEnv); given != env.end() && !given->second.empty()) {
    path = given->second;
  } else {
    const auto tmp = env.find("TMPDIR");
    const std::string dir = tmp != env.end() && !tmp->second.empty() ? tmp->second : "/tmp";
    path = fmt::format("{}/watchdog_timer_{}", dir, make_uuid4());
  }
  auto server = std::make_unique<FileTimerServer>(io, path);
  env[kTimerFileEnv] = path;
  log::get("agent")->info("file timer server on {}", path);
  return server;
}

}  // namespace ddp::agent
