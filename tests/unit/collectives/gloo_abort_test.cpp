// GlooProcessGroup::abort from another thread while a rank is blocked in a collective that a live
// peer never joins (its connections stay open, as with a cut link): the blocked Work throws
// IoError long before the group's timeout, later operations throw, sub-groups are aborted with
// their parent, and the group is destroyed without waiting for the absent peer. Over Gloo's ring,
// shared memory, and the hierarchical all_reduce (both transports in one collective).
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include "ddp/error.hpp"
#include "rank_threads.hpp"

using namespace ddp;
using namespace ddp::coll;
using ddp::coll::test::tensor_of;

namespace {

// Far above the time any abort takes, so that a wait that ran into it cannot pass for an abort.
constexpr std::chrono::seconds kAbortTestTimeout{60};

struct AbortLayout {
  const char* name;
  AllreduceAlgorithm algorithm;
  std::vector<std::string> hosts;  // each rank's shared-memory domain ("" = this host)
};

// Plays 3 ranks laid out as `layout`, with a long timeout and no arrival grace.
void run_abort_ranks(const AbortLayout& layout,
                     const std::function<void(GlooProcessGroup&)>& body) {
  ddp::coll::test::run_ranks_with(
      3,
      [&](int r) {
        GlooOptions options;
        options.timeout = kAbortTestTimeout;
        options.algorithm = layout.algorithm;
        options.shm_domain = layout.hosts.empty() ? "" : layout.hosts[static_cast<std::size_t>(r)];
        options.arrival_grace = std::chrono::milliseconds(0);
        return options;
      },
      body);
}

// Waits for `work`; returns the IoError's message and how long the wait took.
std::pair<std::string, std::chrono::steady_clock::duration> wait_for_io_error(
    const std::shared_ptr<Work>& work) {
  const auto start = std::chrono::steady_clock::now();
  std::string message = "no error";
  try {
    work->wait();
  } catch (const IoError& e) {
    message = e.what();
  } catch (const std::exception& e) {
    message = std::string("not an IoError: ") + e.what();
  }
  return {message, std::chrono::steady_clock::now() - start};
}

const AbortLayout kAbortLayouts[] = {
    {"gloo ring", AllreduceAlgorithm::kRing, {}},
    {"shared memory", AllreduceAlgorithm::kShm, {}},
    {"hierarchical", AllreduceAlgorithm::kAuto, {"a", "a", "b"}},
};

// Rank 2 stays away from `blocked` (its connections open) until ranks 0 and 1 are done with it.
// Rank 0 aborts its group 200 ms into the wait; rank 1 once rank 0's wait failed (rank 0's abort
// closed its connections, so over TCP rank 1 may have failed by itself already).
class AbortScript {
 public:
  // Plays group `g`'s rank; returns false on rank 2, which has nothing more to do.
  bool play(GlooProcessGroup& g, const std::function<std::shared_ptr<Work>()>& blocked) {
    if (g.rank() == 2) {
      others_done_.wait();
      return false;
    }
    struct CountDown {
      std::latch& latch;
      ~CountDown() { latch.count_down(); }
    } count_down{others_done_};
    std::thread aborter([&] {
      if (g.rank() == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      } else {
        rank0_failed_.wait();
      }
      g.abort();
    });
    const auto r = static_cast<std::size_t>(g.rank());
    std::tie(errors[r], waits[r]) = wait_for_io_error(blocked());
    if (g.rank() == 0) rank0_failed_.count_down();
    aborter.join();
    return true;
  }

  std::vector<std::string> errors = std::vector<std::string>(2);
  std::vector<std::chrono::steady_clock::duration> waits =
      std::vector<std::chrono::steady_clock::duration>(2);

 private:
  std::latch rank0_failed_{1};
  std::latch others_done_{2};
};

}  // namespace

TEST_CASE("abort frees a collective blocked on a live peer that never joins", "[gloo][abort]") {
  const auto& layout = kAbortLayouts[GENERATE(0, 1, 2)];
  INFO(layout.name);
  AbortScript script;
  std::vector<int> aborted(2, 0);
  run_abort_ranks(layout, [&](GlooProcessGroup& g) {
    std::vector<float> v{1.0f};
    g.all_reduce(tensor_of(v, DType::kFloat32), ReduceOp::kSum)->wait();
    if (!script.play(g,
                     [&] { return g.all_reduce(tensor_of(v, DType::kFloat32), ReduceOp::kSum); })) {
      return;
    }
    aborted[static_cast<std::size_t>(g.rank())] = g.is_aborted() ? 1 : 0;
    CHECK_THROWS_AS(g.barrier()->wait(), IoError);
    CHECK_THROWS_AS(g.all_reduce(tensor_of(v, DType::kFloat32), ReduceOp::kSum)->wait(), IoError);
  });
  INFO(script.errors[0] << " | " << script.errors[1]);
  CHECK_THAT(script.errors[0], Catch::StartsWith("gloo all_reduce #2 aborted on rank 0"));
  CHECK_THAT(script.errors[1], Catch::StartsWith("gloo all_reduce #2"));
  CHECK(aborted == std::vector<int>{1, 1});
  for (const auto wait : script.waits) CHECK(wait < kAbortTestTimeout / 2);
}

TEST_CASE("aborting a group aborts its sub-groups and frees their blocked collectives",
          "[gloo][abort]") {
  const auto& layout = kAbortLayouts[GENERATE(0, 1)];
  INFO(layout.name);
  AbortScript script;
  std::vector<int> sub_aborted(2, 0);
  run_abort_ranks(layout, [&](GlooProcessGroup& g) {
    auto sub = g.new_group({0, 1, 2});
    REQUIRE(sub);
    std::vector<float> v{1.0f};
    sub->all_reduce(tensor_of(v, DType::kFloat32), ReduceOp::kSum)->wait();
    // play() aborts the parent: its sub-group goes with it.
    if (!script.play(
            g, [&] { return sub->all_reduce(tensor_of(v, DType::kFloat32), ReduceOp::kSum); })) {
      return;
    }
    sub_aborted[static_cast<std::size_t>(g.rank())] = sub->is_aborted() ? 1 : 0;
    CHECK_THROWS_AS(sub->barrier()->wait(), IoError);
    CHECK_THROWS_AS(g.barrier()->wait(), IoError);
  });
  INFO(script.errors[0] << " | " << script.errors[1]);
  CHECK_THAT(script.errors[0], Catch::StartsWith("gloo all_reduce #2 aborted on rank 0"));
  CHECK_THAT(script.errors[1], Catch::StartsWith("gloo all_reduce #2"));
  CHECK(sub_aborted == std::vector<int>{1, 1});
  for (const auto wait : script.waits) CHECK(wait < kAbortTestTimeout / 2);
}

TEST_CASE("abort frees a recv whose sender is alive but never sends", "[gloo][abort]") {
  std::latch receiver_done(1);
  std::string error;
  run_abort_ranks(kAbortLayouts[0], [&](GlooProcessGroup& g) {
    if (g.rank() != 0) {
      if (g.rank() == 1) receiver_done.wait();
      return;
    }
    std::thread aborter([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      g.abort();
    });
    std::vector<float> v(1);
    error = wait_for_io_error(g.recv(tensor_of(v, DType::kFloat32), 1, 5)).first;
    aborter.join();
    CHECK_THROWS_AS(g.send(tensor_of(v, DType::kFloat32), 1, 6), IoError);
    receiver_done.count_down();
  });
  CHECK_THAT(error, Catch::Contains("recv from rank [1] (tag 5)") && Catch::Contains("aborted"));
}
