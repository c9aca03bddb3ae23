#pragma once
// FakeHandover: a WorkerHandover whose workers re-form at once, except the local ranks a test
// names, so the agent's in-process recovery runs without sockets or processes. The fake of the
// seam in agent/core/worker_handover.hpp.

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "agent/core/worker_handover.hpp"

namespace ddp::agent::test {

class FakeHandover final : public WorkerHandover {
 public:
  std::string address() const override { return "@fake-reform"; }

  void publish(const std::vector<WorkerPlace>& places) override { published.push_back(places); }

  boost::asio::awaitable<std::vector<int>> wait_reformed(int round,
                                                         const std::vector<int>& local_ranks,
                                                         std::chrono::milliseconds) override {
    waited_rounds.push_back(round);
    std::vector<int> missing;
    for (int rank : local_ranks) {
      if (not_reforming.count(rank) != 0) missing.push_back(rank);
    }
    co_return missing;
  }

  int connected_pid(int local_rank) const override {
    const auto it = hellos.find(local_rank);
    return it == hellos.end() ? 0 : it->second;
  }

  std::set<int> not_reforming;                      // local ranks that never re-form
  std::map<int, int> hellos;                        // connected_pid()'s answers by local rank
  std::vector<std::vector<WorkerPlace>> published;  // each publish(), in order
  std::vector<int> waited_rounds;                   // each wait_reformed()'s round
};

}  // namespace ddp::agent::test
