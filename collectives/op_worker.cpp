// OpWorker: a plain queue and one thread. Exceptions thrown by an operation travel to wait().
#include "collectives/op_worker.hpp"

namespace ddp::coll {

void TaskWork::wait() {
  {
    std::lock_guard lock(mutex_);
    if (done_) {
      if (error_) std::rethrow_exception(error_);
      return;
    }
  }
  owner_->run_now_if_next(*this);
  std::unique_lock lock(mutex_);
  done_cv_.wait(lock, [&] { return done_; });
  if (error_) std::rethrow_exception(error_);
}

bool TaskWork::is_completed() {
  std::lock_guard lock(mutex_);
  return done_;
}

void TaskWork::complete() {
  {
    std::lock_guard lock(mutex_);
    done_ = true;
  }
  done_cv_.notify_all();
}

void TaskWork::fail(std::exception_ptr error) {
  {
    std::lock_guard lock(mutex_);
    error_ = std::move(error);
    done_ = true;
  }
  done_cv_.notify_all();
}

OpWorker::OpWorker() : thread_([this] { run(); }) {}

OpWorker::~OpWorker() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  queued_cv_.notify_one();
  thread_.join();
}

std::shared_ptr<Work> OpWorker::submit(std::function<void()> op) {
  auto work = std::make_shared<TaskWork>(this);
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(Task{std::move(op), work});
  }
  queued_cv_.notify_one();
  return work;
}

void OpWorker::execute(Task& task) {
  try {
    task.op();
    task.work->complete();
  } catch (...) {
    task.work->fail(std::current_exception());
  }
}

void OpWorker::run_now_if_next(const TaskWork& work) {
  Task task;
  {
    std::lock_guard lock(mutex_);
    if (running_ || queue_.empty() || queue_.front().work.get() != &work) return;
    task = std::move(queue_.front());
    queue_.pop_front();
    running_ = true;
  }
  execute(task);
  bool wake = false;
  {
    std::lock_guard lock(mutex_);
    running_ = false;
    wake = stopping_ || !queue_.empty();
  }
  if (wake) queued_cv_.notify_one();  // the worker waits for the next operation, or to stop
}

void OpWorker::run() {
  for (;;) {
    Task task;
    {
      std::unique_lock lock(mutex_);
      queued_cv_.wait(lock, [&] { return !running_ && (stopping_ || !queue_.empty()); });
      if (queue_.empty()) return;  // stopping, and everything queued has run
      task = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
    }
    execute(task);
    std::lock_guard lock(mutex_);
    running_ = false;
  }
}

}  // namespace ddp::coll
