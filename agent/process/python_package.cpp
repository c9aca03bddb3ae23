// Writing the embedded Python package into a run's directory.

#include "agent/process/python_package.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "ddp/error.hpp"

namespace ddp::agent {

void write_python_package(const std::string& dir) {
  for (const EmbeddedFile& file : embedded_python_files()) {
    const std::filesystem::path path = std::filesystem::path(dir) / file.path;
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    std::ofstream out(path, std::ios::trunc);
    out << file.text;
    out.close();
    if (ec || !out) throw IoError(fmt::format("cannot write {}", path.string()));
  }
}

}  // namespace ddp::agent
