// Failures: a rank that never arrives is named in the error, and the group stays broken.
#include <catch2/catch.hpp>

#include <latch>
#include <string>
#include <vector>

#include "ddp/error.hpp"
#include "rank_threads.hpp"

using namespace ddp;
using namespace ddp::coll;
using ddp::coll::test::run_ranks;
using ddp::coll::test::tensor_of;

TEST_CASE("an all_reduce that one rank skips times out naming that rank", "[gloo][timeout]") {
  const auto algorithm = GENERATE(AllreduceAlgorithm::kRing, AllreduceAlgorithm::kShm);
  INFO("algorithm " << to_string(algorithm));
  std::vector<std::string> errors(3);
  std::vector<int> timeout_errors(3, 0);  // int, not bool: ranks write their own slots at once
  std::latch others_done(2);  // rank 2 stays alive (its connections open) until the others fail
  run_ranks(3, [&](GlooProcessGroup& g) {
    std::vector<float> v{1.0f};
    g.all_reduce(tensor_of(v, DType::kFloat32), ReduceOp::kSum)->wait();
    g.set_timeout(std::chrono::milliseconds(300));
    if (g.rank() == 2) {  // rank 2 never reaches the second all_reduce
      others_done.wait();
      return;
    }
    // Rank 2 waits for this count whatever happens here, so that no failure can hang the test.
    struct CountDown {
      std::latch& latch;
      ~CountDown() { latch.count_down(); }
    } count_down{others_done};
    // The rank whose wait runs out first times out; in the ring, a neighbour may then see its
    // connection close first and fail with that instead. Both name the rank that never came.
    try {
      g.all_reduce(tensor_of(v, DType::kFloat32), ReduceOp::kSum)->wait();
    } catch (const TimeoutError& e) {
      errors[g.rank()] = e.what();
      timeout_errors[g.rank()] = 1;
    } catch (const Error& e) {
      errors[g.rank()] = e.what();
    }
    // The group is now broken: the next op fails at once with the first cause.
    CHECK_THROWS_WITH(g.barrier()->wait(), Catch::Contains("unusable after an earlier failure"));
  }, std::chrono::seconds(20), algorithm);
  int timed_out = 0;
  for (int r = 0; r < 2; ++r) {
    INFO(errors[r]);
    CHECK_THAT(errors[r], Catch::Contains("all_reduce #2") &&
                              Catch::Contains("rank [2] of 3 never arrived"));
    if (errors[r].find("timed out") != std::string::npos) {
      ++timed_out;
      CHECK(timeout_errors[r] == 1);  // a timeout is a TimeoutError, whichever transport ran out
    }
  }
  CHECK(timed_out >= 1);
}

TEST_CASE("a recv whose sender never sends times out naming the peer", "[gloo][timeout]") {
  run_ranks(2, [&](GlooProcessGroup& g) {
    if (g.rank() == 1) return;
    g.set_timeout(std::chrono::milliseconds(200));
    std::vector<float> v(1);
    CHECK_THROWS_WITH(g.recv(tensor_of(v, DType::kFloat32), 1, 9)->wait(),
                      Catch::Contains("recv from rank [1] (tag 9)"));
  });
}

TEST_CASE("a group whose ranks do not all join times out naming the absent ones",
          "[gloo][timeout]") {
  auto store = std::shared_ptr<rdzv::BlockingStore>(rdzv::BlockingStore::in_memory());
  GlooOptions options;
  options.timeout = std::chrono::milliseconds(300);
  CHECK_THROWS_WITH(GlooProcessGroup::create(store, 0, 3, options),
                    Catch::Contains("ranks [1, 2] did not join"));
}
