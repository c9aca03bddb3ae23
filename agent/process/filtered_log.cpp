// FilteredLog: a line is written with one write() of prefix, text and newline, so the lines of
// several workers never mix inside a line; the file is a regular file, so the write is whole.

#include "agent/process/filtered_log.hpp"

#include <algorithm>
#include <cerrno>

#include "agent/core/write_failure.hpp"
#include "agent/process/output_fds.hpp"

namespace ddp::agent {

FilteredLog::FilteredLog(std::string path, std::vector<std::string> filters)
    : path_(std::move(path)), filters_(std::move(filters)), fd_(open_worker_log(path_)) {}

bool FilteredLog::matches(std::string_view line) const {
  return std::any_of(filters_.begin(), filters_.end(), [&](const std::string& needle) {
    return line.find(needle) != std::string_view::npos;
  });
}

void FilteredLog::offer(std::string_view prefix, std::string_view line) {
  if (!fd_ || !matches(line)) return;
  scratch_.assign(prefix);
  scratch_.append(line);
  scratch_.push_back('\n');
  std::string_view rest = scratch_;
  if (write_all(fd_.get(), rest, std::chrono::milliseconds(0)) != WriteResult::kWritten) {
    report_write_failure(WriteTarget::kWorkerLogs, path_, errno);
    fd_.reset();
  }
}

}  // namespace ddp::agent
