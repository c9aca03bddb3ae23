// OutputRouter: pipe -> console (whole lines), file (raw), stderr tail. Readiness-driven: the
// pipe is non-blocking and every wake-up reads until EAGAIN, so the same code serves the loop
// and the synchronous drain after a worker's exit.

#include "agent/process/output_router.hpp"

#include <cerrno>
#include <chrono>
#include <utility>

#include <fmt/format.h>

#include "agent/core/write_failure.hpp"
#include "agent/process/output_fds.hpp"
#include "common/log.hpp"

namespace ddp::agent {

namespace asio = boost::asio;

namespace {

// How long one console write may wait for room in a full non-blocking console before the rest
// of its lines is dropped: bounded, so a console nobody reads never stalls the agent's loop.
constexpr auto kConsoleWait = std::chrono::milliseconds(100);

bool write_whole(int fd, std::string_view data) {
  return write_all(fd, data, kConsoleWait) == WriteResult::kWritten;
}

// One warning per process the first time a full console costs output.
void warn_console_full(int fd, std::size_t dropped) {
  static bool warned = false;
  if (std::exchange(warned, true)) return;
  log::get("agent")->warn(
      "the agent's {} is non-blocking and full (nobody reads it): dropped {} bytes of worker "
      "output, and drops what does not fit within {} ms from now on without warning again",
      fd == 1 ? "stdout" : fd == 2 ? "stderr" : "console", dropped,
      kConsoleWait.count());
}

bool is_identifier_char(char c, bool first) {
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (!first && c >= '0' && c <= '9');
}

}  // namespace

std::string tee_line_prefix(std::string_view templ, std::string_view role_name, int rank,
                            int local_rank, std::string_view hostname, long pid) {
  if (templ.empty()) return fmt::format("[{}{}]:", role_name, local_rank);
  auto value_of = [&](std::string_view name) -> std::optional<std::string> {
    if (name == "role_name") return std::string(role_name);
    if (name == "rank") return std::to_string(rank);
    if (name == "local_rank") return std::to_string(local_rank);
    if (name == "hostname") return std::string(hostname);
    if (name == "pid") return std::to_string(pid);
    return std::nullopt;
  };
  std::string out;
  size_t i = 0;
  while (i < templ.size()) {
    if (templ[i] != '$' || i + 1 == templ.size()) {
      out.push_back(templ[i++]);
      continue;
    }
    if (templ[i + 1] == '$') {
      out.push_back('$');
      i += 2;
      continue;
    }
    const bool braced = templ[i + 1] == '{';
    size_t begin = i + (braced ? 2 : 1);
    size_t end = begin;
    while (end < templ.size() && is_identifier_char(templ[end], end == begin)) ++end;
    const bool closed = !braced || (end < templ.size() && templ[end] == '}');
    const auto value = end > begin && closed ? value_of(templ.substr(begin, end - begin))
                                             : std::nullopt;
    if (!value) {  // safe_substitute leaves what it cannot fill
      out.push_back('$');
      ++i;
      continue;
    }
    out.append(*value);
    i = end + (braced ? 1 : 0);
  }
  return out;
}

OutputRouter::OutputRouter(asio::io_context& io, OutputRoute route, std::span<char> buffer)
    : route_(std::move(route)),
      buffer_(buffer),
      pipe_(io, make_output_pipe(child_end_)) {
  pipe_.non_blocking(true);
  if (route_.keep_tail) tail_.emplace();
  if (!route_.file_path.empty()) file_fd_ = open_worker_log(route_.file_path);
}

OutputRouter::~OutputRouter() = default;

void OutputRouter::close_child_end() { child_end_.reset(); }

void OutputRouter::set_prefixes(std::string console_prefix, std::string tee_prefix) {
  route_.console_prefix = std::move(console_prefix);
  route_.tee_prefix = std::move(tee_prefix);
}

void OutputRouter::start() { arm(); }

void OutputRouter::arm() {
  if (eof_) return;
  pipe_.async_wait(asio::posix::descriptor_base::wait_read,
                   [weak = weak_from_this()](boost::system::error_code ec) {
                     auto self = weak.lock();
                     if (!self || ec) return;
                     self->read_available();
                     self->arm();
                   });
}

void OutputRouter::read_available() {
  while (!eof_) {
    boost::system::error_code ec;
    const size_t n = pipe_.read_some(asio::buffer(buffer_.data(), buffer_.size()), ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) return;
    if (ec == asio::error::interrupted) continue;
    if (ec) {  // EOF: every writer (the worker and its children) has closed the pipe
      finish();
      return;
    }
    const std::string_view chunk(buffer_.data(), n);
    if (file_fd_ && !write_whole(file_fd_.get(), chunk)) {
      report_write_failure(WriteTarget::kWorkerLogs, route_.file_path, errno);
      file_fd_.reset();
    }
    route_lines(chunk);
    // Read on to EAGAIN even after a short read: Asio's epoll is edge-triggered, so data left
    // in the pipe would not wake the next async_wait.
  }
}

void OutputRouter::route_lines(std::string_view chunk) {
  if (route_.console_fd < 0 && !tail_ && !route_.filtered) return;
  splitter_.feed(chunk, [this](std::string_view line) { take_line(line); });
  write_console();
}

void OutputRouter::take_line(std::string_view line) {
  if (tail_) tail_->push(line);
  if (route_.filtered) route_.filtered->offer(route_.tee_prefix, line);
  if (route_.console_fd >= 0) {
    if (route_.labelled.empty() || !line.starts_with(route_.labelled)) {
      console_batch_.append(route_.console_prefix);
    }
    console_batch_.append(line);
    console_batch_.push_back('\n');
  }
}

void OutputRouter::write_console() {
  if (console_batch_.empty()) return;
  std::string_view rest = console_batch_;
  switch (write_all(route_.console_fd, rest, kConsoleWait)) {
    case WriteResult::kWritten:
      break;
    case WriteResult::kFull:  // keep writing later batches: the reader may come back
      console_dropped_bytes_ += rest.size();
      warn_console_full(route_.console_fd, rest.size());
      break;
    case WriteResult::kGone:
      report_write_failure(WriteTarget::kConsole, route_.console_fd == 1 ? "stdout" : "stderr",
                           errno);
      route_.console_fd = -1;  // console gone: stop writing this stream there
      break;
  }
  console_batch_.clear();
}

void OutputRouter::drain_and_flush() {
  read_available();
  splitter_.flush([this](std::string_view line) { take_line(line); });
  write_console();
}

void OutputRouter::finish() {
  eof_ = true;
  boost::system::error_code ignored;
  pipe_.close(ignored);
  drain_and_flush();  // only the partial line is left
}

std::vector<std::string> OutputRouter::tail_lines() const {
  return tail_ ? tail_->lines() : std::vector<std::string>{};
}

}  // namespace ddp::agent
