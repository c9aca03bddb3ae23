// libddp's ProgressGroup: each collective of the default group counts once issued and once
// completed; sub-groups are not tracked.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>

#include "runtime/src/progress_group.hpp"

namespace {

class DoneWork final : public ddp::Work {
 public:
  void wait() override {}
  bool is_completed() override { return true; }
};

class FakeGroup final : public ddp::ProcessGroup {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string backend() const override { return "fake"; }
  std::shared_ptr<ddp::Work> all_reduce(ddp::Tensor, ddp::ReduceOp) override { return done(); }
  std::shared_ptr<ddp::Work> broadcast(ddp::Tensor, int) override { return done(); }
  std::shared_ptr<ddp::Work> all_gather(ddp::Tensor, ddp::Tensor) override { return done(); }
  std::shared_ptr<ddp::Work> reduce_scatter(ddp::Tensor, ddp::Tensor, ddp::ReduceOp) override {
    return done();
  }
  std::shared_ptr<ddp::Work> barrier() override { return done(); }
  std::shared_ptr<ddp::Work> send(ddp::Tensor, int, int) override { return done(); }
  std::shared_ptr<ddp::Work> recv(ddp::Tensor, int, int) override { return done(); }
  std::shared_ptr<ddp::ProcessGroup> new_group(std::vector<int>) override {
    return std::make_shared<FakeGroup>();
  }
  bool abort() override { return aborted_ = true; }
  bool is_aborted() const override { return aborted_; }

 private:
  static std::shared_ptr<ddp::Work> done() { return std::make_shared<DoneWork>(); }
  bool aborted_ = false;
};

}  // namespace

TEST_CASE("the progress group counts issues and completions once each", "[progress]") {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("group-" + std::to_string(::getpid()) + ".progress"))
                               .string();
  auto writer = std::make_shared<ddp::ProgressWriter>(path);
  auto group = ddp::runtime::with_progress(std::make_shared<FakeGroup>(), writer);
  auto first = group->all_reduce({}, ddp::ReduceOp::kSum);
  auto second = group->barrier();
  auto record = ddp::read_progress_record(path);
  REQUIRE(record);
  CHECK(record->seq == 2);
  CHECK(record->completed == 0);
  CHECK(record->op == "barrier");
  CHECK(record->in_collective());
  first->wait();
  first->wait();                // counted once
  CHECK(second->is_completed());  // completion seen by polling counts too
  record = ddp::read_progress_record(path);
  CHECK(record->completed == 2);
  CHECK_FALSE(record->in_collective());
  auto sub = group->new_group({0, 1});
  sub->all_reduce({}, ddp::ReduceOp::kSum)->wait();
  CHECK(ddp::read_progress_record(path)->seq == 2);  // sub-groups are not tracked
  std::filesystem::remove(path);
}

TEST_CASE("issue 29: the progress group passes an abort to the group it wraps", "[progress]") {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("group-abort-" + std::to_string(::getpid()) + ".progress"))
                               .string();
  auto inner = std::make_shared<FakeGroup>();
  auto group = ddp::runtime::with_progress(inner, std::make_shared<ddp::ProgressWriter>(path));
  CHECK_FALSE(group->is_aborted());
  CHECK(group->abort());
  CHECK(inner->is_aborted());
  CHECK(group->is_aborted());
  std::filesystem::remove(path);
}
