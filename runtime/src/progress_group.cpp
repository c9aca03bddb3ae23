// ProgressGroup: counts each collective once when issued and once when its Work completes. The
// cost is two uncontended mutex sections and two clock reads per collective (docs/BENCHMARKS.md).

#include "runtime/src/progress_group.hpp"

#include <atomic>

namespace ddp::runtime {
namespace {

class ProgressWork final : public Work {
 public:
  ProgressWork(std::shared_ptr<Work> inner, std::shared_ptr<ProgressWriter> writer)
      : inner_(std::move(inner)), writer_(std::move(writer)) {}

  void wait() override {
    inner_->wait();
    mark_completed();
  }
  bool is_completed() override {
    const bool done = inner_->is_completed();
    if (done) mark_completed();
    return done;
  }

 private:
  void mark_completed() {
    if (!counted_.exchange(true)) writer_->on_complete();
  }
  std::shared_ptr<Work> inner_;
  std::shared_ptr<ProgressWriter> writer_;
  std::atomic<bool> counted_{false};
};

class ProgressGroup final : public ProcessGroup {
 public:
  ProgressGroup(std::shared_ptr<ProcessGroup> inner, std::shared_ptr<ProgressWriter> writer)
      : inner_(std::move(inner)), writer_(std::move(writer)) {
    set_timeout(inner_->timeout());
  }

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string backend() const override { return inner_->backend(); }

  std::shared_ptr<Work> all_reduce(Tensor t, ReduceOp op) override {
    return track("all_reduce", [&] { return inner_->all_reduce(t, op); });
  }
  std::shared_ptr<Work> broadcast(Tensor t, int root) override {
    return track("broadcast", [&] { return inner_->broadcast(t, root); });
  }
  std::shared_ptr<Work> all_gather(Tensor in, Tensor out) override {
    return track("all_gather", [&] { return inner_->all_gather(in, out); });
  }
  std::shared_ptr<Work> reduce_scatter(Tensor in, Tensor out, ReduceOp op) override {
    return track("reduce_scatter", [&] { return inner_->reduce_scatter(in, out, op); });
  }
  std::shared_ptr<Work> barrier() override { return track("barrier", [&] { return inner_->barrier(); }); }
  std::shared_ptr<Work> send(Tensor t, int dst, int tag) override {
    return track("send", [&] { return inner_->send(t, dst, tag); });
  }
  std::shared_ptr<Work> recv(Tensor t, int src, int tag) override {
    return track("recv", [&] { return inner_->recv(t, src, tag); });
  }
  // Sub-groups are not tracked: only the default group's collectives are issued by every rank
  // in the same order, so only their sequence numbers compare across ranks.
  std::shared_ptr<ProcessGroup> new_group(std::vector<int> ranks) override {
    return inner_->new_group(std::move(ranks));
  }
  bool abort() override { return inner_->abort(); }
  bool is_aborted() const override { return inner_->is_aborted(); }

 private:
  // The issue is recorded before the backend is called: a backend may block inside the call
  // itself, and a rank blocked there waits in that collective.
  template <typename Call>
  std::shared_ptr<Work> track(const char* op, Call call) {
    writer_->on_issue(op);
    return std::make_shared<ProgressWork>(call(), writer_);
  }
  std::shared_ptr<ProcessGroup> inner_;
  std::shared_ptr<ProgressWriter> writer_;
};

}  // namespace

std::shared_ptr<ProcessGroup> with_progress(std::shared_ptr<ProcessGroup> inner,
                                            std::shared_ptr<ProgressWriter> writer) {
  return std::make_shared<ProgressGroup>(std::move(inner), std::move(writer));
}

}  // namespace ddp::runtime
