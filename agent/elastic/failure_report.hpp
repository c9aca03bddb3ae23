#pragma once
// The root-cause report printed when restarts run out (torchrun's ChildFailedError summary, plus
// the worker's stderr tail and ddprun's exit code rule), and the exit code it implies. Pure
// formatting, except reading the workers' error files.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/process/worker_group.hpp"

namespace ddp::agent {

// The worker failures to report, in order of time: exits that failed and that the agent did not
// cause itself. A worker the agent stopped is no failure when the agent's own signal ended it;
// one that exited non-zero or died by another signal after the agent signalled it (crashed on its
// own while stopping) is listed, as torchrun 2.x lists it. A replaced exit (its local rank started
// again while its peers ran on) is not: it spent its restart, and the report is the last attempt's.
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

// What the report says beyond the exits: the interpreter Python workers ran under (empty for
// --no_python) and where the run's logs were kept (empty: none worth naming).
struct ReportContext {
  std::string interpreter;         // e.g. "/usr/bin/python3 (python3 on PATH)"
  std::string interpreter_choice;  // "--python", "PYTHON_EXEC", "PET_PYTHON" or "python3 on PATH"
  std::string log_dir;
  // One line each, after the failures: what else happened to the workers on the way (workers
  // started again because they did not re-form in time, --recovery=inprocess).
  std::vector<std::string> notes;
};

// The report text, ending in a newline. `failures` is reportable_failures() (not empty); the
// first is the root cause. `host` names this node. When the root cause's stderr or error file
// shows an import error (ModuleNotFoundError, ImportError), a note names the interpreter that
// lacked the module and how to choose another.
std::string format_failure_report(const std::string& entrypoint, const std::string& host,
                                  const std::vector<WorkerExit>& failures,
                                  const ReportContext& context = {});

// The module a Python import error names in `lines` ("torch" for "ModuleNotFoundError: No module
// named 'torch'"), "" for an ImportError without a module name; nullopt when there is none.
std::optional<std::string> missing_python_module(const std::vector<std::string>& lines);

}  // namespace ddp::agent
