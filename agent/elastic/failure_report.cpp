// The failure report. Layout after torchrun's (so people who know it read it at once), with
// what torchrun leaves out: the signal name, a hint when the OOM killer is likely, the last
// stderr lines, and the exit code ddprun will return.

#include "agent/elastic/failure_report.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <ctime>
#include <fstream>
#include <sstream>

#include "agent/core/signal_names.hpp"

namespace ddp::agent {
namespace {

constexpr const char* kNoTraceback =
    "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html";

std::string local_time(std::chrono::system_clock::time_point t) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  localtime_r(&seconds, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d_%H:%M:%S", &tm);
  return text;
}

std::string exit_text(const WorkerExit& exit) {
  if (exit.signal != 0) {
    return fmt::format("-{} (pid: {}) ({})", exit.signal, exit.pid, signal_name(exit.signal));
  }
  return fmt::format("{} (pid: {})", exit.exit_code, exit.pid);
}

// Indents every line after the first by `indent`.
std::string indented(const std::string& text, const std::string& indent) {
  std::string out;
  for (char c : text) {
    out += c;
    if (c == '\n') out += indent;
  }
  while (!out.empty() && (out.back() == ' ' || out.back() == '\n')) out.pop_back();
  return out;
}

}  // namespace

std::vector<WorkerExit> reportable_failures(const std::vector<WorkerExit>& exits) {
  std::vector<WorkerExit> failures;
  for (const auto& exit : exits) {
    // Ended by the signal the agent sent: the agent's doing, not a failure of its own.
    const bool ended_by_agent =
        exit.stopped_by_agent && exit.signal != 0 && exit.signal == exit.agent_signal;
    // A replaced exit spent its restart already; the report is about the last attempt.
    if (exit.failed() && !ended_by_agent && !exit.replaced) failures.push_back(exit);
  }
  std::stable_sort(failures.begin(), failures.end(), [](const WorkerExit& a, const WorkerExit& b) {
    return a.mono_time < b.mono_time;
  });
  return failures;
}

int exit_code_for(const WorkerExit& exit) {
  return exit.signal != 0 ? 128 + exit.signal : exit.exit_code;
}

std::optional<ErrorFileRecord> read_error_file(const std::string& path) {
  if (path.empty()) return std::nullopt;
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  ErrorFileRecord record;
  const auto doc = nlohmann::json::parse(text.str(), nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("message")) {
    record.message = "<the error file is not torchrun's JSON format>";
    return record;
  }
  const auto& message = doc["message"];
  if (message.is_string()) {  // {"message": "<text>", "timestamp": <int>}
    record.message = message.get<std::string>();
    if (doc.contains("timestamp") && doc["timestamp"].is_number_integer()) {
      record.timestamp = doc["timestamp"].get<long long>();
    }
    return record;
  }
  if (message.is_object()) {  // {"message": {"message", "extraInfo": {py_callstack, timestamp}}}
    record.message = message.value("message", std::string{});
    if (message.contains("extraInfo") && message["extraInfo"].is_object()) {
      const auto& extra = message["extraInfo"];
      record.traceback = extra.value("py_callstack", std::string{});
      if (extra.contains("timestamp") && extra["timestamp"].is_string()) {
        try {
          record.timestamp = std::stoll(extra["timestamp"].get<std::string>());
        } catch (const std::exception&) {
        }
      }
    }
    return record;
  }
  record.message = "<the error file is not torchrun's JSON format>";
  return record;
}

std::optional<std::string> missing_python_module(const std::vector<std::string>& lines) {
  constexpr std::string_view kNoModule = "ModuleNotFoundError: No module named '";
  for (const std::string& line : lines) {
    if (const std::size_t at = line.find(kNoModule); at != std::string::npos) {
      const std::size_t start = at + kNoModule.size();
      const std::size_t end = line.find('\'', start);
      std::string module = line.substr(start, end == std::string::npos ? end : end - start);
      return module;
    }
    if (line.starts_with("ImportError: ")) return std::string();
  }
  return std::nullopt;
}

std::string format_failure_report(const std::string& entrypoint, const std::string& host,
                                  const std::vector<WorkerExit>& failures,
                                  const ReportContext& context) {
  if (failures.empty()) return {};
  const WorkerExit& root = failures.front();
  const std::string bar(60, '=');
  const std::string rule(60, '-');
  std::string out = "\n" + bar + "\n" + entrypoint + " FAILED\n" + rule + "\n";
  out += "Root Cause (first observed failure):\n";
  out += fmt::format("  time      : {}\n", local_time(root.wall_time));
  out += fmt::format("  host      : {}\n", host);
  out += fmt::format("  rank      : {} (local_rank: {})\n", root.rank, root.local_rank);
  out += fmt::format("  exitcode  : {}\n", exit_text(root));
  if (root.signal != 0 && root.oom_suspected) {
    out += "  note      : SIGKILL: possibly the OOM killer (the cgroup's oom_kill count rose)\n";
  }
  const auto record = read_error_file(root.error_file);
  out += fmt::format("  error_file: {}\n", record ? root.error_file : "<N/A>");
  std::string traceback;
  if (record) {
    traceback = record->traceback.empty() ? record->message : record->traceback;
  } else if (root.signal != 0) {
    traceback = fmt::format("Signal {} ({}) received by PID {}", root.signal,
                            signal_name(root.signal), root.pid);
  } else {
    traceback = kNoTraceback;
  }
  out += fmt::format("  traceback : {}\n", indented(traceback, "    "));
  if (!context.interpreter.empty()) {
    out += fmt::format("  python    : {} ({})\n", context.interpreter, context.interpreter_choice);
    std::vector<std::string> evidence = root.stderr_tail;
    if (record) evidence.push_back(record->message);
    if (const auto module = missing_python_module(evidence)) {
      out += fmt::format(
          "  note      : {} cannot import {}; run the workers under another interpreter with "
          "--python=/path/to/python or PYTHON_EXEC=/path/to/python (e.g. /usr/bin/python3)\n",
          context.interpreter,
          module->empty() ? "what the script imports" : fmt::format("'{}'", *module));
    }
  }
  if (!root.stderr_tail.empty()) {
    out += fmt::format("  stderr (last {} lines):\n", root.stderr_tail.size());
    for (const auto& line : root.stderr_tail) out += "    " + line + "\n";
  }
  out += rule + "\nOther Failures:\n";
  if (failures.size() == 1) out += "  <NO_OTHER_FAILURES>\n";
  for (std::size_t i = 1; i < failures.size(); ++i) {
    const auto& f = failures[i];
    out += fmt::format("  [{}] time {} rank {} (local_rank: {}) exitcode {}\n", i,
                       local_time(f.wall_time), f.rank, f.local_rank, exit_text(f));
  }
  out += bar + "\n";
  for (const auto& note : context.notes) out += "note: " + note + "\n";
  if (!context.log_dir.empty()) out += fmt::format("logs kept in {}\n", context.log_dir);
  out += fmt::format("ddprun exits with {} (the root cause's {})\n", exit_code_for(root),
                     root.signal != 0 ? "128 + signal number" : "exit code");
  return out;
}

}  // namespace ddp::agent
