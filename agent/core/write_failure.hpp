#pragma once
// Reports that output the agent writes (the event log, worker log files, the console) is being
// lost: one line on stderr the first time each kind of output fails, silence after that, so a
// full disk neither goes unnoticed nor floods the log. Agent thread only.

#include <string_view>

namespace ddp::agent {

enum class WriteTarget { kEventLog, kWorkerLogs, kConsole };

// Logs the failure of writing `path` (errno value `error`) unless `target` failed before in this
// process. Returns true when it logged. A console reader that went away (EPIPE: `ddprun | head`)
// is not a failure and is never reported.
bool report_write_failure(WriteTarget target, std::string_view path, int error);

}  // namespace ddp::agent
