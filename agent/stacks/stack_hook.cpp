// The Python stack hook. faulthandler writes from its C signal handler, so the dump arrives even
// while the main thread is blocked in a collective's C++ code and never takes the GIL. The chain
// finds the next sitecustomize on sys.path without the hook's own directory and executes it as
// the module "sitecustomize", as site.py would have.

#include "agent/stacks/stack_hook.hpp"

#include <fmt/format.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "ddp/error.hpp"

namespace ddp::agent {
namespace {

constexpr const char* kSiteCustomize =
    R"PY(# Written by ddprun: registers faulthandler on ddprun's stack signal, then runs the
# sitecustomize this interpreter would have run without it (see ddprun's docs/agent.md).
import os as _os
import sys as _sys


def _ddprun_register_stacks():
    import faulthandler
    number = int(_os.environ.get("DDPRUN_STACK_SIGNAL", "0") or "0")
    directory = _os.environ.get("DDPRUN_STACK_DIR", "")
    if number <= 0 or not _os.path.isdir(directory):
        return None
    path = _os.path.join(directory, "python-%d.txt" % _os.getpid())
    stream = open(path, "ab", buffering=0)
    faulthandler.register(number, file=stream, all_threads=True, chain=False)
    return stream


def _ddprun_chain_sitecustomize():
    import importlib.machinery
    import importlib.util
    here = _os.path.dirname(_os.path.abspath(__file__))
    path = [p for p in _sys.path if _os.path.abspath(p or _os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    _sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


try:
    _ddprun_stack_stream = _ddprun_register_stacks()
except Exception as _error:  # diagnostics must never stop the worker
    print("ddprun: stack dumps unavailable: %s" % _error, file=_sys.stderr)
_ddprun_chain_sitecustomize()
)PY";

}  // namespace

int stack_signal() { return SIGRTMIN + 6; }

std::string python_hook_dir(const std::string& run_dir) {
  return (std::filesystem::path(run_dir) / "python").string();
}

std::string python_stack_file(const std::string& stack_dir, long pid) {
  return (std::filesystem::path(stack_dir) / fmt::format("python-{}.txt", pid)).string();
}

void write_python_hook(const std::string& run_dir) {
  const std::filesystem::path dir = python_hook_dir(run_dir);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const auto path = dir / "sitecustomize.py";
  std::ofstream out(path, std::ios::trunc);
  out << kSiteCustomize;
  out.close();
  if (ec || !out) throw IoError(fmt::format("cannot write {}", path.string()));
}

void add_stack_hook_env(std::map<std::string, std::string>& set,
                        const std::map<std::string, std::string>& parent_env,
                        const std::string& run_dir, const std::string& worker_log_dir) {
  set[kStackSignalEnv] = std::to_string(stack_signal());
  set[kStackDirEnv] = worker_log_dir;
  std::string path = python_hook_dir(run_dir);
  const auto it = parent_env.find("PYTHONPATH");
  if (it != parent_env.end() && !it->second.empty()) path += ":" + it->second;
  set["PYTHONPATH"] = path;
}

}  // namespace ddp::agent
