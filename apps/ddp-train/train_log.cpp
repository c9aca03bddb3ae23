// TrainLog's lines. Written with fmt rather than a JSON library: every field is a number, a
// boolean or a path, and the line is built in one buffer so that it is appended in one write().

#include "apps/ddp-train/train_log.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "ddp/error.hpp"

namespace ddp::train {
namespace {

// A JSON string: quotes, backslashes and control characters escaped.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<int>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string position(const TrainPosition& pos) {
  return fmt::format("\"epoch\": {}, \"step\": {}", pos.epoch, pos.step);
}

}  // namespace

TrainLog::TrainLog(const std::string& path) {
  if (path.empty()) return;
  fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw ConfigError(fmt::format("--train_log {}: {}", path, std::strerror(errno)));
  }
}

TrainLog::~TrainLog() {
  if (fd_ >= 0) ::close(fd_);
}

void TrainLog::append(const char* event, const std::string& fields) {
  if (!writing_) return;
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const std::string line = fmt::format("{{\"event\": \"{}\", \"t\": {:.6f}, \"pid\": {}, {}}}\n",
                                       event, now, ::getpid(), fields);
  // One write: O_APPEND places it whole at the end. A failed write (full disk) loses the line,
  // never the run: the log is a record, not a reason to stop training.
  [[maybe_unused]] const ssize_t n = ::write(fd_, line.data(), line.size());
}

void TrainLog::start(const TrainStart& s) {
  const char* master = std::getenv("MASTER_ADDR");
  const char* restarts = std::getenv("TORCHELASTIC_RESTART_COUNT");
  append("start", fmt::format("{}, \"world_size\": {}, \"restart_count\": {}, "
                              "\"checkpoint_step\": {}, \"round\": {}, \"commits\": {}, "
                              "\"master_addr\": {}",
                              position(s.pos), s.world_size,
                              restarts != nullptr ? std::atoi(restarts) : 0, s.checkpoint_step,
                              s.round, s.commits, quoted(master != nullptr ? master : "")));
}

void TrainLog::step(const TrainPosition& pos, int world_size) {
  append("step", fmt::format("{}, \"world_size\": {}", position(pos), world_size));
}

void TrainLog::commit(const TrainPosition& pos, std::int64_t commits) {
  append("commit", fmt::format("{}, \"commits\": {}", position(pos), commits));
}

void TrainLog::checkpoint(const TrainPosition& pos, const std::string& path) {
  append("checkpoint", fmt::format("{}, \"path\": {}", position(pos), quoted(path)));
}

void TrainLog::params(const TrainPosition& pos, int world_size, std::int64_t crc_min,
                      std::int64_t crc_max) {
  append("params", fmt::format("{}, \"world_size\": {}, \"crc_min\": {}, \"crc_max\": {}",
                               position(pos), world_size, crc_min, crc_max));
}

void TrainLog::end(const TrainPosition& pos, int world_size, double test_accuracy,
                   bool stopped) {
  append("end", fmt::format("{}, \"world_size\": {}, \"test_accuracy\": {:.4f}, \"stopped\": {}",
                            position(pos), world_size, test_accuracy, stopped));
}

}  // namespace ddp::train
