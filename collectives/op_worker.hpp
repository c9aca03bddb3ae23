#pragma once
// OpWorker: the thread that runs a process group's operations one after another, in submission
// order, and the Work handles that report their completion. Owned by the group; the destructor
// finishes the queued operations, then joins.

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "ddp/process_group.hpp"

namespace ddp::coll {

// A Work completed by whoever holds it (the worker thread): complete() or fail().
class TaskWork final : public Work {
 public:
  void wait() override;
  bool is_completed() override;

  void complete();
  void fail(std::exception_ptr error);

 private:
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

class OpWorker {
 public:
  OpWorker();
  ~OpWorker();
  OpWorker(const OpWorker&) = delete;
  OpWorker& operator=(const OpWorker&) = delete;

  // Queues `op`; the returned Work completes when it returns, or fails with what it throws.
  std::shared_ptr<Work> submit(std::function<void()> op);

 private:
  struct Task {
    std::function<void()> op;
    std::shared_ptr<TaskWork> work;
  };
  void run();

  std::mutex mutex_;
  std::condition_variable queued_cv_;
  std::deque<Task> queue_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts after the members above exist
};

}  // namespace ddp::coll
