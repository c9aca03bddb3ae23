// check_entrypoint: the rules, in the order a user would fix them: the interpreter first (nothing
// Python runs without it), then the script or module. Each message names the option or variable
// the value came from, so the fix is obvious from one line.

#include "agent/cli/entrypoint_check.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include "agent/cli/program_search.hpp"
#include "ddp/error.hpp"

namespace ddp::agent {
namespace {

// Generous: an interpreter on a cold network file system may take seconds to start. Past it the
// check gives up silently and the workers report whatever happens.
constexpr std::chrono::milliseconds kFinderTimeout{20000};

std::string interpreter_origin(const LaunchConfig& config,
                               const std::map<std::string, std::string>& env) {
  switch (config.source_of("python")) {
    case ValueSource::kCli:
      return "--python";
    case ValueSource::kEnv:  // PET_PYTHON is read before PYTHON_EXEC
      return env.contains("PET_PYTHON") ? "PET_PYTHON" : "PYTHON_EXEC";
    default:
      return "interpreter";
  }
}

void check_interpreter(const LaunchConfig& config, const std::map<std::string, std::string>& env) {
  if (is_executable_program(config.python, env)) return;
  if (config.python.find('/') != std::string::npos) {
    throw ConfigError(fmt::format("{}: interpreter '{}' does not exist or is not executable",
                                  interpreter_origin(config, env), config.python));
  }
  throw ConfigError(fmt::format("{}: '{}' not found in PATH (give --python or PYTHON_EXEC)",
                                interpreter_origin(config, env), config.python));
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

void check_entrypoint(const LaunchConfig& config,
                      const std::map<std::string, std::string>& process_env) {
  // Without PATH, execvp (and so the spawner) searches glibc's default; the check does too.
  std::map<std::string, std::string> env = process_env;
  env.try_emplace("PATH", "/bin:/usr/bin");
  const std::string& entry = config.training_script;
  if (config.no_python && !config.run_path) {
    if (!is_executable_program(entry, env)) {
      throw ConfigError(
          fmt::format("training_script: '{}' is not an executable program{} (--no_python)", entry,
                      entry.find('/') == std::string::npos ? " found in PATH" : ""));
    }
    return;
  }
  check_interpreter(config, env);
  if (config.module && !config.run_path) {
    if (entry == "ddprun" || entry.starts_with("ddprun.")) return;  // on the workers' PYTHONPATH
    if (find_python_module(config.python, entry, env, kFinderTimeout) == ModuleLookup::kMissing) {
      throw ConfigError(fmt::format("-m/--module: no module named '{}' for interpreter '{}'", entry,
                                    config.python));
    }
    return;
  }
  // "-" is Python's standard input.
  if (entry != "-" && !exists(entry)) {
    throw ConfigError(fmt::format("training_script: '{}': no such file", entry));
  }
}

}  // namespace ddp::agent
