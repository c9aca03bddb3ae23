#pragma once
// The agent's machine-readable events (--event_log FILE): rendezvous, workers_started,
// worker_exited, workers_stopped, restart, finish. The agent emits them through the EventSink
// interface; JsonLinesEventLog writes one JSON object per line (format in docs/agent.md), and
// tests record them in memory. Used from the agent's thread only.

#include <chrono>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace ddp::agent {

using EventValue = std::variant<std::int64_t, std::string, std::vector<std::int64_t>>;

struct Event {
  explicit Event(std::string event_name) : name(std::move(event_name)) {}

  std::string name;  // "rendezvous", "workers_started", ...
  std::chrono::system_clock::time_point wall_time = std::chrono::system_clock::now();
  std::chrono::steady_clock::time_point mono_time = std::chrono::steady_clock::now();
  std::vector<std::pair<std::string, EventValue>> fields;  // in the order they are written

  Event& with(std::string key, EventValue value) {
    fields.emplace_back(std::move(key), std::move(value));
    return *this;
  }
};

// ddprun's exit code when the job succeeded but its event log could not be written in full
// (EX_IOERR from sysexits.h). A failed job keeps the failure's exit code.
inline constexpr int kEventLogLostExitCode = 74;

class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void emit(const Event& event) = 0;
  // True once an event could not be recorded (a write failed); the sink reported it already.
  virtual bool has_lost_events() const { return false; }
};

// Passes every event to each of several sinks, in order (the event log and the metrics).
class TeeEventSink final : public EventSink {
 public:
  // Null entries are skipped. The sinks must outlive the tee.
  explicit TeeEventSink(std::vector<EventSink*> sinks);
  void emit(const Event& event) override;
  bool has_lost_events() const override;

 private:
  std::vector<EventSink*> sinks_;
};

// Drops every event (no --event_log).
class NullEventSink final : public EventSink {
 public:
  void emit(const Event&) override {}
};

// Appends JSON lines to a file, flushed per event so a killed agent leaves whole lines. The first
// write that fails (a full disk) is reported once on stderr (write_failure.hpp); nothing more is
// written after it and has_lost_events() turns true.
class JsonLinesEventLog final : public EventSink {
 public:
  // Opens (truncates) `path`. Throws ConfigError naming --event_log and the path on failure.
  explicit JsonLinesEventLog(const std::string& path);
  void emit(const Event& event) override;
  bool has_lost_events() const override { return lost_; }

 private:
  std::string path_;
  std::ofstream out_;
  bool lost_ = false;
};

// One event as its JSON line (no newline): {"version":1,"event":..,"wall_time":<epoch s>,
// "mono_time":<steady s>, fields...}.
std::string to_json_line(const Event& event);

// The sink main() uses: JsonLinesEventLog for a path, else NullEventSink.
std::unique_ptr<EventSink> make_event_sink(const std::string* path);

}  // namespace ddp::agent
