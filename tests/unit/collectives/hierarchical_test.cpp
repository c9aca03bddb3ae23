// The hierarchical all_reduce (shared memory within a host, Gloo's ring among the hosts' leaders)
// of groups whose ranks pretend to live on several hosts (GlooOptions::shm_domain): exact results
// for every op on several layouts, tensors over several shared-memory slots, bitwise agreement of
// all ranks, the other collectives alongside, and the ring where every host has one rank.
#include <catch2/catch.hpp>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "collectives/shm/shm_collectives.hpp"
#include "rank_threads.hpp"

using namespace ddp;
using namespace ddp::coll;
using ddp::coll::test::run_ranks_on_hosts;
using ddp::coll::test::tensor_of;

TEST_CASE("hierarchical all_reduce gives every op's exact result on uneven hosts",
          "[hierarchical]") {
  const auto hosts = GENERATE(std::vector<std::string>{"a", "a", "b", "b"},
                              std::vector<std::string>{"a", "a", "b"},
                              std::vector<std::string>{"a", "b", "a", "b", "c"});
  const int size = static_cast<int>(hosts.size());
  run_ranks_on_hosts(hosts, [&](GlooProcessGroup& g) {
    REQUIRE(g.algorithm() == AllreduceAlgorithm::kHierarchical);
    const auto r = static_cast<std::int64_t>(g.rank());
    std::vector<std::int64_t> v(1001);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = r * 1000 + static_cast<std::int64_t>(i);
    auto sum = v, mx = v, mn = v, prod = std::vector<std::int64_t>(7, r + 1);
    g.all_reduce(tensor_of(sum, DType::kInt64), ReduceOp::kSum)->wait();
    g.all_reduce(tensor_of(mx, DType::kInt64), ReduceOp::kMax)->wait();
    g.all_reduce(tensor_of(mn, DType::kInt64), ReduceOp::kMin)->wait();
    g.all_reduce(tensor_of(prod, DType::kInt64), ReduceOp::kProduct)->wait();
    std::vector<double> avg(5, static_cast<double>(r));
    g.all_reduce(tensor_of(avg, DType::kFloat64), ReduceOp::kAvg)->wait();
    const std::int64_t n = size;
    std::int64_t factorial = 1;
    for (std::int64_t k = 2; k <= n; ++k) factorial *= k;
    for (std::size_t i = 0; i < v.size(); ++i) {
      const auto idx = static_cast<std::int64_t>(i);
      REQUIRE(sum[i] == 1000 * n * (n - 1) / 2 + n * idx);
      REQUIRE(mx[i] == (n - 1) * 1000 + idx);
      REQUIRE(mn[i] == idx);
    }
    CHECK(prod == std::vector<std::int64_t>(7, factorial));
    CHECK(avg == std::vector<double>(5, static_cast<double>(n - 1) / 2));
    // The other collectives go through Gloo over all ranks, in the same group.
    std::vector<float> b(3, static_cast<float>(r));
    g.broadcast(tensor_of(b, DType::kFloat32), size - 1)->wait();
    CHECK(b == std::vector<float>(3, static_cast<float>(size - 1)));
    std::vector<std::int32_t> in{static_cast<std::int32_t>(r)};
    std::vector<std::int32_t> out(hosts.size());
    g.all_gather(tensor_of(in, DType::kInt32), tensor_of(out, DType::kInt32))->wait();
    for (int k = 0; k < size; ++k) CHECK(out[static_cast<std::size_t>(k)] == k);
    g.barrier()->wait();
  });
}

TEST_CASE("hierarchical all_reduce over several slots leaves every rank bitwise equal",
          "[hierarchical]") {
  const std::size_t n =
      shm::ShmCollectives::kSlotBytes / sizeof(float) * 2 + 12345;  // three chunks
  std::mutex mutex;
  std::vector<std::vector<float>> results(4);
  run_ranks_on_hosts({"a", "b", "a", "b"}, [&](GlooProcessGroup& g) {
    std::mt19937 gen(static_cast<unsigned>(g.rank()) + 7);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(gen);
    g.all_reduce(tensor_of(v, DType::kFloat32), ReduceOp::kSum)->wait();
    std::lock_guard lock(mutex);
    results[static_cast<std::size_t>(g.rank())] = std::move(v);
  });
  for (int r = 1; r < 4; ++r) CHECK(results[r] == results[0]);
  // The exact value: each host sums its ranks in rank order, then the two leaders add.
  std::vector<std::vector<float>> inputs(4, std::vector<float>(n));
  for (unsigned r = 0; r < 4; ++r) {
    std::mt19937 gen(r + 7);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (auto& x : inputs[r]) x = dist(gen);
  }
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const float host_a = inputs[0][i] + inputs[2][i];
    const float host_b = inputs[1][i] + inputs[3][i];
    if (results[0][i] != host_a + host_b) ++mismatches;
  }
  CHECK(mismatches == 0);
}

TEST_CASE("a group with one rank a host keeps Gloo's ring", "[hierarchical]") {
  run_ranks_on_hosts({"a", "b", "c"}, [](GlooProcessGroup& g) {
    CHECK(g.algorithm() == AllreduceAlgorithm::kRing);
    std::vector<float> v(9, 1.0f);
    g.all_reduce(tensor_of(v, DType::kFloat32), ReduceOp::kSum)->wait();
    CHECK(v == std::vector<float>(9, 3.0f));
  });
}

TEST_CASE("sub-groups of a multi-host group choose for their own ranks", "[hierarchical]") {
  run_ranks_on_hosts({"a", "a", "b", "b"}, [](GlooProcessGroup& g) {
    auto same_host = g.new_group({0, 1});
    auto across = g.new_group({1, 2, 3});
    if (same_host) {
      CHECK(dynamic_cast<GlooProcessGroup&>(*same_host).algorithm() == AllreduceAlgorithm::kShm);
    }
    if (across) {
      auto& sub = dynamic_cast<GlooProcessGroup&>(*across);
      CHECK(sub.algorithm() == AllreduceAlgorithm::kHierarchical);
      std::vector<std::int32_t> v{g.rank()};
      sub.all_reduce(tensor_of(v, DType::kInt32), ReduceOp::kSum)->wait();
      CHECK(v[0] == 6);
    }
  });
}
