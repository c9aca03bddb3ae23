#pragma once
// RecordingEventSink: keeps every event the agent emits, in order, for tests to read back (the
// fake beside JsonLinesEventLog; ninja's status fakes).

#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "agent/core/event_log.hpp"

namespace ddp::agent::test {

class RecordingEventSink final : public EventSink {
 public:
  void emit(const Event& event) override { events.push_back(event); }

  // Every event's name, in order.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& event : events) out.push_back(event.name);
    return out;
  }

  // The events named `name`, in order.
  std::vector<Event> named(const std::string& name) const {
    std::vector<Event> out;
    for (const auto& event : events) {
      if (event.name == name) out.push_back(event);
    }
    return out;
  }

  std::vector<Event> events;
};

// The field `key` of `event` as T; throws std::out_of_range when absent, std::bad_variant_access
// when it holds another type.
template <typename T>
T field(const Event& event, const std::string& key) {
  for (const auto& [name, value] : event.fields) {
    if (name == key) return std::get<T>(value);
  }
  throw std::out_of_range("event " + event.name + " has no field " + key);
}

}  // namespace ddp::agent::test
