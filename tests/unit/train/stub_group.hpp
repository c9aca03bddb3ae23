#pragma once
// StubGroup: a ProcessGroup of one rank whose operations do nothing (nullptr Work), for the
// train tests' fakes to override what they record (reducer_test, recovery_session_test).

#include <memory>
#include <string>
#include <vector>

#include "ddp/process_group.hpp"

namespace ddp::test {

class StubGroup : public ProcessGroup {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "nccl"; }
  std::shared_ptr<Work> all_reduce(Tensor, ReduceOp) override { return nullptr; }
  std::shared_ptr<Work> broadcast(Tensor, int) override { return nullptr; }
  std::shared_ptr<Work> all_gather(Tensor, Tensor) override { return nullptr; }
  std::shared_ptr<Work> reduce_scatter(Tensor, Tensor, ReduceOp) override { return nullptr; }
  std::shared_ptr<Work> barrier() override { return nullptr; }
  std::shared_ptr<Work> send(Tensor, int, int) override { return nullptr; }
  std::shared_ptr<Work> recv(Tensor, int, int) override { return nullptr; }
  std::shared_ptr<ProcessGroup> new_group(std::vector<int>) override { return nullptr; }
};

}  // namespace ddp::test
