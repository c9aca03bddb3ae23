#pragma once
// FilteredLog: torchrun 2.x's --duplicate_stdout_filters / --duplicate_stderr_filters. One file per
// stream and attempt (<attempt_dir>/filtered_stdout.log, filtered_stderr.log) that collects, from
// every worker whose stream is teed to the console, the lines containing any of the filter
// strings, each with the worker's tee prefix. Shared by the OutputRouters of one WorkerGroup;
// agent thread only.

#include <string>
#include <string_view>
#include <vector>

#include "common/unique_fd.hpp"

namespace ddp::agent {

class FilteredLog {
 public:
  // Opens `path` (truncating it). Throws IoError naming the path.
  FilteredLog(std::string path, std::vector<std::string> filters);

  // True when `line` contains any filter string (plain substring, as torchrun's `needle in line`).
  bool matches(std::string_view line) const;

  // Appends "<prefix><line>\n" when the line matches. A write error is reported once (worker
  // logs) and closes the file.
  void offer(std::string_view prefix, std::string_view line);

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::vector<std::string> filters_;
  UniqueFd fd_;
  std::string scratch_;
};

}  // namespace ddp::agent
