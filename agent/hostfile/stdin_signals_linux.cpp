// StdinSignals: lines from the launcher's ssh channel become signals to this process. Unknown
// lines are logged and ignored (a newer launcher may send more). The duplicate of fd 0 is
// non-blocking and CLOEXEC so that workers, which inherit fd 0 itself, are not affected.

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <cerrno>
#include <csignal>
#include <cstring>

#include "agent/core/signal_names.hpp"
#include "agent/hostfile/stdin_signals.hpp"
#include "agent/process/line_splitter.hpp"
#include "common/log.hpp"
#include "ddp/error.hpp"

namespace ddp::agent {

namespace asio = boost::asio;

struct StdinSignals::Impl : std::enable_shared_from_this<Impl> {
  asio::posix::stream_descriptor in;
  LineSplitter lines{256};
  std::array<char, 256> buffer{};

  Impl(asio::io_context& io, int fd) : in(io, fd) {}

  void arm() {
    in.async_read_some(asio::buffer(buffer),
                       [weak = weak_from_this()](boost::system::error_code ec, std::size_t n) {
                         if (auto self = weak.lock()) self->on_read(ec, n);
                       });
  }

  void on_read(boost::system::error_code ec, std::size_t n) {
    if (ec == asio::error::operation_aborted) return;
    if (ec) {  // EOF or a broken channel: the launcher is gone
      log::get("agent")->warn("stdin closed: the launcher's ssh connection is gone");
      ::kill(::getpid(), SIGHUP);
      return;
    }
    lines.feed(std::string_view(buffer.data(), n), [](std::string_view line) { act_on(line); });
    arm();
  }

  static void act_on(std::string_view line) {
    line = line.substr(0, line.find('\r'));
    if (line.empty()) return;
    try {
      const std::vector<int> signals = parse_signal_list(line, "stdin");
      for (const int signal : signals) ::kill(::getpid(), signal);
    } catch (const Error& e) {
      log::get("agent")->warn("ignoring stdin line '{}': {}", line, e.what());
    }
  }
};

StdinSignals::StdinSignals(asio::io_context& io) {
  const int fd = ::fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
  if (fd < 0) {
    throw IoError(fmt::format("--stdin_signals: cannot use stdin: {}", std::strerror(errno)));
  }
  try {
    impl_ = std::make_shared<Impl>(io, fd);
  } catch (const boost::system::system_error& e) {  // epoll refuses regular files
    throw IoError(fmt::format("--stdin_signals: stdin cannot be watched: {}", e.what()));
  }
  impl_->in.non_blocking(true);
  impl_->arm();
}

StdinSignals::~StdinSignals() {
  boost::system::error_code ignored;
  impl_->in.close(ignored);
}

}  // namespace ddp::agent
