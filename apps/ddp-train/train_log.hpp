#pragma once
// TrainLog: ddp-train's --train_log, a JSON-lines record of the run that a supervisor (a fault
// soak, a dashboard) reads while the job trains: one line per start (or re-form), optimizer step,
// in-memory commit, checkpoint, cross-rank parameter check and end. Rank 0 writes it; every
// line is appended with one write() on an O_APPEND descriptor, so a reader never sees two lines
// mixed, and a process killed mid-line leaves at most its last line cut. The fields of each
// event are in docs/trainer.md.

#include <cstdint>
#include <string>

#include "apps/ddp-train/train_state.hpp"

namespace ddp::train {

// Where a run (re-)entered training.
struct TrainStart {
  TrainPosition pos;
  int world_size = 1;
  std::int64_t checkpoint_step = -1;  // the checkpoint it resumed from; -1: none
  int round = -1;             // in-process recovery: the round it joined; -1: not re-forming
  std::int64_t commits = -1;  // in-process recovery: the commits of the state it synced to
};

class TrainLog {
 public:
  // Opens `path` for appending (created when missing); an empty path gives a log that writes
  // nothing. Every rank opens it; only the process that is rank 0 now writes (set_rank: rank 0
  // may change at an in-process re-form). Throws ConfigError naming --train_log when it cannot
  // open the file.
  explicit TrainLog(const std::string& path);
  ~TrainLog();
  TrainLog(const TrainLog&) = delete;
  TrainLog& operator=(const TrainLog&) = delete;

  void set_rank(int rank) { writing_ = fd_ >= 0 && rank == 0; }

  // Also names TORCHELASTIC_RESTART_COUNT and MASTER_ADDR (the job's store) from the environment.
  void start(const TrainStart& s);
  void step(const TrainPosition& pos, int world_size);
  void commit(const TrainPosition& pos, std::int64_t commits);
  void checkpoint(const TrainPosition& pos, const std::string& path);
  // The least and the greatest CRC32 of the ranks' parameters (equal when all hold the same).
  void params(const TrainPosition& pos, int world_size, std::int64_t crc_min,
              std::int64_t crc_max);
  void end(const TrainPosition& pos, int world_size, double test_accuracy, bool stopped);

 private:
  // Appends {"event": event, "t": <unix seconds>, "pid": <pid>, <fields>} and a newline.
  void append(const char* event, const std::string& fields);

  int fd_ = -1;
  bool writing_ = false;
};

}  // namespace ddp::train
