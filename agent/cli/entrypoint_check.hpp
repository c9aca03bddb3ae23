#pragma once
// Errors before anything starts: the entry point is checked once, before the rendezvous, so a
// typo in the script, module or interpreter is one line and exit 2 rather than a worker group that
// starts and fails on every node. Called by main() for a local run (not --dry_run, not the
// --hostfile launcher, whose hosts check for themselves).

#include <chrono>
#include <map>
#include <string>

#include "agent/cli/launch_config.hpp"

namespace ddp::agent {

// Throws ConfigError naming what is missing:
// - Python modes: the interpreter (--python, $PYTHON_EXEC or python3 from PATH) must be an
//   executable file; the script (default mode and --run_path) must exist;
// - -m: `<python> -c <finder> <module>` must find the module (and a package's __main__) on the
//   workers' sys.path without importing it or its parents (find_python_module);
// - --no_python: the program must be executable (as given, or found in PATH).
// The ddprun package (-m ddprun...) is shipped with the run and is not looked up. `env` is
// ddprun's environment (PATH, PYTHONPATH); without PATH, /bin:/usr/bin is searched, as execvp
// does.
void check_entrypoint(const LaunchConfig& config, const std::map<std::string, std::string>& env);

enum class ModuleLookup {
  kFound,
  kMissing,  // the finder ran and found nothing
  kUnknown,  // the finder could not answer (crashed, timed out): the workers will tell
};

// Runs `python -c <finder> module` with `env` as its environment, stdout and stderr to
// /dev/null, and waits up to `timeout` (then kills it: kUnknown). The finder uses
// importlib.util.find_spec for the top-level name and importlib.machinery.PathFinder for each
// further part inside the parent's submodule_search_locations, so no module code runs.
ModuleLookup find_python_module(const std::string& python, const std::string& module,
                                const std::map<std::string, std::string>& env,
                                std::chrono::milliseconds timeout);

}  // namespace ddp::agent
