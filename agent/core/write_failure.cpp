// One flag per kind of output. The event log's message names the exit code, because a lost event
// log is the one write failure that changes how ddprun exits (docs/agent.md).

#include "agent/core/write_failure.hpp"

#include <cerrno>
#include <cstring>

#include "agent/core/event_log.hpp"
#include "common/log.hpp"

namespace ddp::agent {

bool report_write_failure(WriteTarget target, std::string_view path, int error) {
  static bool reported[3] = {false, false, false};
  if (target == WriteTarget::kConsole && error == EPIPE) return false;
  bool& done = reported[static_cast<int>(target)];
  if (done) return false;
  done = true;
  auto log = log::get("agent");
  switch (target) {
    case WriteTarget::kEventLog:
      log->error(
          "cannot write the event log {}: {}; later events are lost, and ddprun exits with {} "
          "if the job otherwise succeeds",
          path, std::strerror(error), kEventLogLostExitCode);
      break;
    case WriteTarget::kWorkerLogs:
      log->warn(
          "cannot write the worker log {}: {}; its output from here on is lost (later "
          "failures of worker logs are not reported again)",
          path, std::strerror(error));
      break;
    case WriteTarget::kConsole:
      log->warn(
          "cannot write worker output to the console ({}): {}; that stream is lost from "
          "here on",
          path, std::strerror(error));
      break;
  }
  return true;
}

}  // namespace ddp::agent
