#pragma once
// The root-cause report printed when restarts run out (torchrun's ChildFailedError summary, plus
// the worker's stderr tail and ddprun's exit code rule), and the exit code it implies. Pure
// formatting, except reading the workers' error files.

#include <optional>
#include <string>
#include <vector>

#include "agent/worker_group.hpp"

namespace ddp::agent {

// The worker failures to report, in order of time: exits that failed and that the agent did not
// cause itself (workers it stopped after the first failure are not failures).
std::vector<WorkerExit> reportable_failures(const std::vector<WorkerExit>& exits);

// srun's rule: the worker's exit code, or 128+N when signal N ended it.
int exit_code_for(const WorkerExit& exit);

// What a worker's TORCHELASTIC_ERROR_FILE says (torchrun's JSON formats, docs/agent.md).
struct ErrorFileRecord {
  std::string message;    // "ValueError: boom" (dict format) or the string message
  std::string traceback;  // extraInfo.py_callstack; empty when absent
  std::optional<long long> timestamp;  // epoch seconds, when given
};

// nullopt when the file does not exist; a record whose message says so when it is not JSON of
// either format.
std::optional<ErrorFileRecord> read_error_file(const std::string& path);

// The report text, ending in a newline. `failures` is reportable_failures() (not empty); the
// first is the root cause. `host` names this node.
std::string format_failure_report(const std::string& entrypoint, const std::string& host,
                                  const std::vector<WorkerExit>& failures);

}  // namespace ddp::agent
