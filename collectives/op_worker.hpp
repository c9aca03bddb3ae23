#pragma once
// OpWorker: the thread that runs a process group's operations one after another, in submission
// order, and the Work handles that report their completion. Owned by the group; the destructor
// finishes the queued operations, then joins.
//
// A caller that waits for the operation next in line, while the worker is not running one, runs
// it on its own thread instead: submit-then-wait then costs no thread hand-off (on a VM a
// sleeping thread takes up to a millisecond to wake), and operations still run one at a time in
// submission order. Operations nobody waits for yet run on the worker, overlapping the caller.

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "ddp/process_group.hpp"

namespace ddp::coll {

class OpWorker;

// A Work completed by whoever runs its operation: complete() or fail().
class TaskWork final : public Work {
 public:
  explicit TaskWork(OpWorker* owner) : owner_(owner) {}
  void wait() override;
  bool is_completed() override;

  void complete();
  void fail(std::exception_ptr error);

 private:
  OpWorker* owner_;  // alive while this work is not done: its destructor drains the queue
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

  // Runs `work`'s operation on the calling thread if it is next in line and no operation is
  // running; otherwise does nothing (the worker will run it).
  void run_now_if_next(const TaskWork& work);

 private:
  struct Task {
    std::function<void()> op;
    std::shared_ptr<TaskWork> work;
  };
  void run();
  static void execute(Task& task);

  std::mutex mutex_;
  std::condition_variable queued_cv_;
  std::deque<Task> queue_;
  bool running_ = false;  // an operation is running, on the worker or on a waiting caller
  bool stopping_ = false;
  std::thread thread_;  // last: starts after the members above exist
};

}  // namespace ddp::coll
