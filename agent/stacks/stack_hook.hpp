#pragma once
// The worker side of stack dumps: the environment ddprun gives each worker and the
// sitecustomize.py it puts first on PYTHONPATH. That sitecustomize registers Python's
// faulthandler on ddprun's stack signal (every thread, appended to
// $DDPRUN_STACK_DIR/python-<pid>.txt) and then runs the sitecustomize the worker would have run
// without it (the user's, or Debian's), so nothing the user set up is shadowed.

#include <map>
#include <string>

namespace ddp::agent {

inline constexpr const char* kStackSignalEnv = "DDPRUN_STACK_SIGNAL";
inline constexpr const char* kStackDirEnv = "DDPRUN_STACK_DIR";

// ddprun's stack signal: SIGRTMIN+6 (40 with glibc). Its default action would end a process that
// has no handler for it, so it is only sent to workers whose hook registered (python-<pid>.txt).
int stack_signal();

// "<run_dir>/python": where the agent writes sitecustomize.py.
std::string python_hook_dir(const std::string& run_dir);

// The file a Python worker with pid `pid` dumps into: "<stack_dir>/python-<pid>.txt".
std::string python_stack_file(const std::string& stack_dir, long pid);

// Writes sitecustomize.py into python_hook_dir(run_dir). Throws IoError naming the path.
void write_python_hook(const std::string& run_dir);

// The variables the hook needs for one worker, over `parent_env`: DDPRUN_STACK_SIGNAL,
// DDPRUN_STACK_DIR=<worker_log_dir>, and PYTHONPATH with the hook's directory first (the parent's
// PYTHONPATH after it).
void add_stack_hook_env(std::map<std::string, std::string>& set,
                        const std::map<std::string, std::string>& parent_env,
                        const std::string& run_dir, const std::string& worker_log_dir);

}  // namespace ddp::agent
