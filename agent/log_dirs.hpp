#pragma once
// The per-run log tree, as torchrun lays it out (n: the restart count):
//   <base>/<run_id>_<random>/attempt_<n>/<local_rank>/{stdout.log,stderr.log,error.json}
// base = --log_dir (created if missing) or a fresh "$TMPDIR/ddprun_XXXXXX" (never deleted).
// Called from the agent's thread; blocking filesystem calls, done before workers start.

#include <map>
#include <optional>
#include <string>

namespace ddp::agent {

// Creates and returns the run directory "<base>/<run_id>_XXXXXX". `env` supplies TMPDIR when
// `log_dir` is unset. Throws IoError naming the path when a directory cannot be created.
std::string create_run_log_dir(const std::optional<std::string>& log_dir, const std::string& run_id,
                               const std::map<std::string, std::string>& env);

// "<run_dir>/attempt_<restart_count>" (pure).
std::string attempt_log_dir(const std::string& run_dir, int restart_count);

// "<attempt_dir>/<local_rank>" (pure).
std::string worker_log_dir(const std::string& attempt_dir, int local_rank);

// Wipes `attempt_dir` if it exists and creates it with one subdirectory per local rank
// 0..nproc_per_node-1, as torchrun does when an attempt starts. Throws IoError naming the path.
void prepare_attempt_log_dir(const std::string& attempt_dir, int nproc_per_node);

}  // namespace ddp::agent
