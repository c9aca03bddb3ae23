// The per-run log tree. mkdtemp gives the unique run directory (so concurrent jobs with the same
// run id, e.g. "none", never share files); attempt directories are wiped as torchrun wipes them,
// so stale logs of an earlier run with the same tree can never be mistaken for this attempt's.

#include "agent/cli/log_dirs.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "ddp/error.hpp"

namespace ddp::agent {
namespace {

namespace fs = std::filesystem;

void make_directories(const fs::path& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) throw IoError(fmt::format("log dir: cannot create {}: {}", path.string(), ec.message()));
}

std::string make_temp_dir(const fs::path& parent, const std::string& prefix) {
  std::string pattern = (parent / (prefix + "XXXXXX")).string();
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (::mkdtemp(buffer.data()) == nullptr) {
    throw IoError(fmt::format("log dir: cannot create {}: {}", pattern, std::strerror(errno)));
  }
  return std::string(buffer.data());
}

}  // namespace

std::string create_run_log_dir(const std::optional<std::string>& log_dir, const std::string& run_id,
                               const std::map<std::string, std::string>& env) {
  fs::path base;
  if (log_dir) {
    base = *log_dir;
    make_directories(base);
  } else {
    const auto tmpdir = env.find("TMPDIR");
    const fs::path parent =
        tmpdir != env.end() && !tmpdir->second.empty() ? fs::path(tmpdir->second) : "/tmp";
    base = make_temp_dir(parent, "ddprun_");
  }
  // A run id may hold '/' (it is free text); keep the directory one level deep.
  std::string safe_id = run_id;
  for (char& c : safe_id) {
    if (c == '/') c = '_';
  }
  return make_temp_dir(base, safe_id + "_");
}

std::string attempt_log_dir(const std::string& run_dir, int restart_count, int start) {
  const std::string name = start > 0 ? fmt::format("attempt_{}.{}", restart_count, start)
                                     : fmt::format("attempt_{}", restart_count);
  return (fs::path(run_dir) / name).string();
}

std::string worker_log_dir(const std::string& attempt_dir, int local_rank) {
  return (fs::path(attempt_dir) / std::to_string(local_rank)).string();
}

namespace {

// ddprun's own bookkeeping, not logs: the Python stack hook (<run>/python/, stack_hook.cpp), the
// file each Python worker opens for its stack dumps while still empty (python-<pid>.txt), and
// each rank's progress record (<run>/attempt_<n>/<local_rank>/progress, worker_spec.cpp).
bool is_bookkeeping(const fs::directory_entry& entry) {
  const fs::path& path = entry.path();
  if (path.filename() == "progress") return true;
  if (path.filename().string().starts_with("python-") && path.extension() == ".txt") {
    std::error_code ec;
    return entry.file_size(ec) == 0 && !ec;
  }
  for (const fs::path& part : path.parent_path()) {
    if (part == "python") return true;  // the hook and Python's __pycache__ beside it
  }
  return false;
}

// True when anything but a directory or ddprun's bookkeeping lies below `dir` (or it cannot be
// walked: keep it then).
bool holds_files(const std::string& dir) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (it->symlink_status(ec).type() != fs::file_type::directory && !is_bookkeeping(*it)) {
      return true;
    }
  }
  return static_cast<bool>(ec);
}

}  // namespace

bool remove_if_no_files(const std::string& dir) {
  if (holds_files(dir)) return false;
  std::error_code ec;
  fs::remove_all(dir, ec);
  return !ec;
}

TemporaryLogDir::TemporaryLogDir(const std::optional<std::string>& log_dir,
                                 const std::string& run_dir)
    : run_dir_(run_dir) {
  if (!log_dir) base_ = fs::path(run_dir).parent_path().string();
}

TemporaryLogDir::~TemporaryLogDir() {
  if (!base_.empty()) remove_if_no_files(base_);
}

std::string TemporaryLogDir::kept_dir() const {
  return !base_.empty() && holds_files(run_dir_) ? run_dir_ : std::string();
}

void prepare_attempt_log_dir(const std::string& attempt_dir, int nproc_per_node) {
  std::error_code ec;
  fs::remove_all(attempt_dir, ec);
  if (ec) throw IoError(fmt::format("log dir: cannot remove {}: {}", attempt_dir, ec.message()));
  for (int local_rank = 0; local_rank < nproc_per_node; ++local_rank) {
    make_directories(worker_log_dir(attempt_dir, local_rank));
  }
}

void prepare_worker_log_dir(const std::string& attempt_dir, int local_rank) {
  make_directories(worker_log_dir(attempt_dir, local_rank));
}

}  // namespace ddp::agent
