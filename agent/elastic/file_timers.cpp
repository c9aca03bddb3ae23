// FileTimers: torchrun's register_timers / get_expired_timers / _run_watchdog selection rules.
// nlohmann parses the line without exceptions; a request that names no pid, scope or numbers is
// refused as a whole.

#include "agent/elastic/file_timers.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace ddp::agent {

std::optional<FileTimerRequest> parse_file_timer_request(std::string_view line) {
  const auto json = nlohmann::json::parse(line, nullptr, false);
  if (json.is_discarded() || !json.is_object()) return std::nullopt;
  const auto pid = json.find("pid");
  const auto scope = json.find("scope_id");
  const auto expiration = json.find("expiration_time");
  const auto signal = json.find("signal");
  if (pid == json.end() || !pid->is_number_integer() || scope == json.end() ||
      !scope->is_string() || expiration == json.end() || !expiration->is_number() ||
      (signal != json.end() && !signal->is_number_integer())) {
    return std::nullopt;
  }
  FileTimerRequest request;
  request.pid = pid->get<pid_t>();
  request.scope_id = scope->get<std::string>();
  request.expiration_time = expiration->get<double>();
  request.signal = signal == json.end() ? 0 : signal->get<int>();
  if (request.pid <= 0) return std::nullopt;  // never a process group or "every process"
  return request;
}

void FileTimers::apply(const FileTimerRequest& request) {
  const auto key = std::pair(request.pid, request.scope_id);
  if (request.expiration_time < 0) {
    timers_.erase(key);
  } else {
    timers_[key] = request;
  }
}

std::vector<TimerExpiry> FileTimers::take_expired(double now) {
  std::map<pid_t, std::vector<FileTimerRequest>> expired;
  for (const auto& [key, request] : timers_) {
    if (request.expiration_time <= now) expired[key.first].push_back(request);
  }
  std::vector<TimerExpiry> out;
  for (auto& [pid, requests] : expired) {
    std::sort(requests.begin(), requests.end(),
              [](const auto& a, const auto& b) { return a.expiration_time < b.expiration_time; });
    TimerExpiry expiry{.pid = pid, .scopes = {}, .signal = 0};
    for (const auto& request : requests) {
      expiry.scopes.push_back(request.scope_id);
      if (expiry.signal == 0 && request.signal > 0) expiry.signal = request.signal;
    }
    out.push_back(std::move(expiry));
    std::erase_if(timers_, [pid = pid](const auto& entry) { return entry.first.first == pid; });
  }
  return out;
}

std::optional<double> FileTimers::next_expiration() const {
  std::optional<double> next;
  for (const auto& [key, request] : timers_) {
    if (!next || request.expiration_time < *next) next = request.expiration_time;
  }
  return next;
}

}  // namespace ddp::agent
