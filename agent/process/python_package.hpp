#pragma once
// The `ddprun` Python package (python/ddprun/ in the source tree), embedded in the agent at build
// time and written into each run's log directory, where the workers' PYTHONPATH already points
// (stack_hook.hpp's python_hook_dir). Workers import `ddprun.elastic` and the forkserver's
// template without anything installed, whatever copy of the ddprun binary started them.

#include <string>
#include <vector>

namespace ddp::agent {

struct EmbeddedFile {
  const char* path;  // relative to python/, e.g. "ddprun/__init__.py"
  const char* text;
};

// Every file of python/, as the build embedded it (generated: cmake/EmbedFiles.cmake).
const std::vector<EmbeddedFile>& embedded_python_files();

// Writes every embedded file under `dir` (creating folders). Throws IoError naming the path.
void write_python_package(const std::string& dir);

}  // namespace ddp::agent
