#pragma once
// ArrivalTracker: records in the group's store which operation each rank has reached, so that a
// failed or timed-out operation can name the ranks that never arrived. Each rank owns one key,
// "arrived/<rank>" = the sequence number of the latest operation it started. A background thread
// writes it, coalescing updates (at most one write per kWriteInterval), so the hot path of an
// operation never waits on the store.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "rendezvous/store_client/blocking_store.hpp"

namespace ddp::coll {

class ArrivalTracker {
 public:
  static constexpr std::chrono::milliseconds kWriteInterval{50};

  ArrivalTracker(std::shared_ptr<rdzv::BlockingStore> store, int rank, int size);
  ~ArrivalTracker();
  ArrivalTracker(const ArrivalTracker&) = delete;
  ArrivalTracker& operator=(const ArrivalTracker&) = delete;

  // This rank started operation `seq` (non-decreasing). Never blocks on the store.
  void arrive(std::uint64_t seq);

  // The group ranks that have not reached operation `seq`, after giving them up to `grace` to
  // report (their writers may lag by kWriteInterval). Writes this rank's mark first.
  std::vector<int> missing_ranks(std::uint64_t seq, std::chrono::milliseconds grace);

 private:
  void write_loop();
  void write_mark(std::uint64_t seq);

  std::shared_ptr<rdzv::BlockingStore> store_;
  int rank_;
  int size_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::uint64_t latest_ = 0;   // guarded by mutex_
  std::uint64_t written_ = 0;  // guarded by mutex_
  bool stopping_ = false;      // guarded by mutex_
  bool writer_idle_ = false;   // guarded by mutex_: the writer waits for a new mark
  std::thread writer_;
};

}  // namespace ddp::coll
