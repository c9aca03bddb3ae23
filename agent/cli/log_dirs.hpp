#pragma once
// The per-run log tree, as torchrun lays it out (n: the restart count):
//   <base>/<run_id>_<random>/attempt_<n>/<local_rank>/{stdout.log,stderr.log,error.json}
// base = --log_dir (created if missing) or a fresh "$TMPDIR/ddprun_XXXXXX", removed at exit when
// no file was written in it (TemporaryLogDir).
// Called from the agent's thread; blocking filesystem calls, done before workers start.

#include <map>
#include <optional>
#include <string>

namespace ddp::agent {

// Creates and returns the run directory "<base>/<run_id>_XXXXXX". `env` supplies TMPDIR when
// `log_dir` is unset. Throws IoError naming the path when a directory cannot be created.
std::string create_run_log_dir(const std::optional<std::string>& log_dir, const std::string& run_id,
                               const std::map<std::string, std::string>& env);

// "<run_dir>/attempt_<restart_count>" (pure). With `start` > 0:
// "<run_dir>/attempt_<restart_count>.<start>", the folder of the start-th further start of
// processes at one restart count (--recovery=inprocess starts processes again without spending a
// restart: each start keeps its own logs).
std::string attempt_log_dir(const std::string& run_dir, int restart_count, int start = 0);

// "<attempt_dir>/<local_rank>" (pure).
std::string worker_log_dir(const std::string& attempt_dir, int local_rank);

// Wipes `attempt_dir` if it exists and creates it with one subdirectory per local rank
// 0..nproc_per_node-1, as torchrun does when an attempt starts. Throws IoError naming the path.
void prepare_attempt_log_dir(const std::string& attempt_dir, int nproc_per_node);

// Creates "<attempt_dir>/<local_rank>" for a worker started again while its peers run on
// (--recovery=inprocess); what is there already stays. Throws IoError naming the path.
void prepare_worker_log_dir(const std::string& attempt_dir, int local_rank);

// Removes `dir` and everything below it when it holds directories only (no file of any kind).
// Returns true when it was removed; false when a file is there or it cannot be removed.
bool remove_if_no_files(const std::string& dir);

// Owns the temporary base of a run without --log_dir: its destructor removes it when no worker
// wrote a file there (torchrun deletes its own temporary directory too). With --log_dir it owns
// nothing. Used on the agent's thread; the destructor must run after the workers are gone.
class TemporaryLogDir {
 public:
  // `run_dir` is create_run_log_dir()'s result for `log_dir`.
  TemporaryLogDir(const std::optional<std::string>& log_dir, const std::string& run_dir);
  ~TemporaryLogDir();
  TemporaryLogDir(const TemporaryLogDir&) = delete;
  TemporaryLogDir& operator=(const TemporaryLogDir&) = delete;

  // Where the logs stay when they are kept: the run directory, for the failure report; "" when
  // the run directory holds no file (it will be removed) or --log_dir was given.
  std::string kept_dir() const;

 private:
  std::string base_;  // "$TMPDIR/ddprun_XXXXXX"; "" with --log_dir
  std::string run_dir_;
};

}  // namespace ddp::agent
