#pragma once
// The descriptors OutputRouter routes through, and the syscalls on them: the worker's output
// pipe, the per-worker log file and a bounded write to a console that may be full.

#include <chrono>
#include <string>
#include <string_view>

#include "common/unique_fd.hpp"

namespace ddp::agent {

// Creates a close-on-exec pipe: stores the write end (the worker's stdout/stderr) in
// `write_end` and returns the read end for the caller to own. Throws IoError.
int make_output_pipe(UniqueFd& write_end);

// Opens (truncating) a worker's log file for appending, close-on-exec, mode 0644. Throws IoError
// naming the path.
UniqueFd open_worker_log(const std::string& path);

enum class WriteResult { kWritten, kFull, kGone };

// Writes all of `data` to `fd`. A full non-blocking fd (EAGAIN: a console someone else set up)
// gets at most `wait_for_room` in all, then kFull with `data` left holding what was not
// written; kGone, with errno saying why, when the fd is gone (EPIPE, EBADF...).
WriteResult write_all(int fd, std::string_view& data, std::chrono::milliseconds wait_for_room);

}  // namespace ddp::agent
