// JSON-lines event log. Timestamps are seconds as doubles: wall time since the epoch (for people
// and other machines) and the steady clock (for latencies within one run).

#include "agent/core/event_log.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cerrno>

#include "agent/core/write_failure.hpp"
#include "ddp/error.hpp"

namespace ddp::agent {
namespace {

template <typename Clock>
double seconds_since_epoch(typename Clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

}  // namespace

std::string to_json_line(const Event& event) {
  nlohmann::ordered_json line;
  line["version"] = 1;
  line["event"] = event.name;
  line["wall_time"] = seconds_since_epoch<std::chrono::system_clock>(event.wall_time);
  line["mono_time"] = seconds_since_epoch<std::chrono::steady_clock>(event.mono_time);
  for (const auto& [key, value] : event.fields) {
    std::visit([&line, &key](const auto& v) { line[key] = v; }, value);
  }
  return line.dump();
}

TeeEventSink::TeeEventSink(std::vector<EventSink*> sinks) {
  for (EventSink* sink : sinks) {
    if (sink != nullptr) sinks_.push_back(sink);
  }
}

void TeeEventSink::emit(const Event& event) {
  for (EventSink* sink : sinks_) sink->emit(event);
}

bool TeeEventSink::has_lost_events() const {
  for (const EventSink* sink : sinks_) {
    if (sink->has_lost_events()) return true;
  }
  return false;
}

JsonLinesEventLog::JsonLinesEventLog(const std::string& path)
    : path_(path), out_(path, std::ios::trunc) {
  if (!out_) throw ConfigError(fmt::format("--event_log: cannot open {} for writing", path));
}

void JsonLinesEventLog::emit(const Event& event) {
  // After a failed write the file may end in a partial line; appending more would put a valid
  // line after garbage, so the log stops there.
  if (lost_) return;
  errno = 0;
  out_ << to_json_line(event) << '\n';
  out_.flush();
  if (!out_) {
    lost_ = true;
    report_write_failure(WriteTarget::kEventLog, path_, errno != 0 ? errno : EIO);
  }
}

std::unique_ptr<EventSink> make_event_sink(const std::string* path) {
  if (path == nullptr) return std::make_unique<NullEventSink>();
  return std::make_unique<JsonLinesEventLog>(*path);
}

}  // namespace ddp::agent
