// JSON-lines event log. Timestamps are seconds as doubles: wall time since the epoch (for people
// and other machines) and the steady clock (for latencies within one run).

#include "agent/event_log.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

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

JsonLinesEventLog::JsonLinesEventLog(const std::string& path) : out_(path, std::ios::trunc) {
  if (!out_) throw ConfigError(fmt::format("--event_log: cannot open {} for writing", path));
}

void JsonLinesEventLog::emit(const Event& event) {
  out_ << to_json_line(event) << '\n';
  out_.flush();
}

std::unique_ptr<EventSink> make_event_sink(const std::string* path) {
  if (path == nullptr) return std::make_unique<NullEventSink>();
  return std::make_unique<JsonLinesEventLog>(*path);
}

}  // namespace ddp::agent
