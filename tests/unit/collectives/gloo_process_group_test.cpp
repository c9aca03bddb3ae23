// GlooProcessGroup with every rank a thread of this process (real TCP over loopback).
#include <catch2/catch.hpp>

#include <cstdint>
#include <numeric>
#include <algorithm>
#include <vector>

#include "collectives/reduce_functions.hpp"
#include "ddp/error.hpp"
#include "rank_threads.hpp"

using namespace ddp;
using namespace ddp::coll;
using ddp::coll::test::run_ranks;
using ddp::coll::test::tensor_of;

TEST_CASE("all_reduce sums, averages, multiplies and takes min and max on 3 ranks",
          "[gloo]") {
  const auto algorithm = GENERATE(AllreduceAlgorithm::kRing, AllreduceAlgorithm::kShm);
  INFO("algorithm " << to_string(algorithm));
  run_ranks(3, [algorithm](GlooProcessGroup& g) {
    CHECK(g.algorithm() == algorithm);
    const int r = g.rank();
    std::vector<float> sum(1001);
    std::iota(sum.begin(), sum.end(), static_cast<float>(r));
    g.all_reduce(tensor_of(sum, DType::kFloat32), ReduceOp::kSum)->wait();
    for (std::size_t i = 0; i < sum.size(); ++i) REQUIRE(sum[i] == 3.0f * i + 3.0f);

    std::vector<double> avg{static_cast<double>(r), 6.0};
    g.all_reduce(tensor_of(avg, DType::kFloat64), ReduceOp::kAvg)->wait();
    CHECK(avg == std::vector<double>{1.0, 6.0});

    std::vector<std::int64_t> prod{r + 2, -1};
    g.all_reduce(tensor_of(prod, DType::kInt64), ReduceOp::kProduct)->wait();
    CHECK(prod == std::vector<std::int64_t>{24, -1});

    std::vector<std::int32_t> mn{r, -r}, mx{r, -r};
    auto w1 = g.all_reduce(tensor_of(mn, DType::kInt32), ReduceOp::kMin);
    auto w2 = g.all_reduce(tensor_of(mx, DType::kInt32), ReduceOp::kMax);
    w1->wait();
    w2->wait();
    CHECK(w1->is_completed());
    CHECK(mn == std::vector<std::int32_t>{0, -2});
    CHECK(mx == std::vector<std::int32_t>{2, 0});

    std::vector<std::uint16_t> half{float_to_half(0.5f * r)};
    g.all_reduce(tensor_of(half, DType::kFloat16), ReduceOp::kSum)->wait();
    CHECK(half_to_float(half[0]) == 1.5f);
  }, std::chrono::seconds(20), algorithm);
}

TEST_CASE("bcube all_reduce gives the same sums as ring", "[gloo]") {
  auto store = std::shared_ptr<rdzv::BlockingStore>(rdzv::BlockingStore::in_memory());
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] {
      GlooOptions options;
      options.algorithm = AllreduceAlgorithm::kBcube;
      options.timeout = std::chrono::seconds(20);
      auto g = GlooProcessGroup::create(store, r, 4, options);
      std::vector<float> v(257, static_cast<float>(r + 1));
      g->all_reduce(tensor_of(v, DType::kFloat32), ReduceOp::kSum)->wait();
      ok[r] = std::all_of(v.begin(), v.end(), [](float x) { return x == 10.0f; });
    });
  }
  for (auto& t : threads) t.join();
  CHECK(ok == std::vector<int>{1, 1, 1, 1});
}

TEST_CASE("broadcast, all_gather, reduce_scatter and barrier on 3 ranks", "[gloo]") {
  const auto algorithm = GENERATE(AllreduceAlgorithm::kRing, AllreduceAlgorithm::kShm);
  INFO("algorithm " << to_string(algorithm));
  run_ranks(3, [](GlooProcessGroup& g) {
    const int r = g.rank();
    std::vector<std::uint8_t> b(5, static_cast<std::uint8_t>(r * 10));
    g.broadcast(tensor_of(b, DType::kUInt8), 2)->wait();
    CHECK(b == std::vector<std::uint8_t>(5, 20));

    std::vector<std::int32_t> in{r, r * 100}, out(6);
    g.all_gather(tensor_of(in, DType::kInt32), tensor_of(out, DType::kInt32))->wait();
    CHECK(out == std::vector<std::int32_t>{0, 0, 1, 100, 2, 200});

    std::vector<float> rs_in{1, 2, 3, 4, 5, 6}, rs_out(2);
    for (auto& x : rs_in) x *= static_cast<float>(r + 1);
    g.reduce_scatter(tensor_of(rs_in, DType::kFloat32), tensor_of(rs_out, DType::kFloat32),
                     ReduceOp::kSum)->wait();
    CHECK(rs_out == std::vector<float>{6.0f * (2 * r + 1), 6.0f * (2 * r + 2)});

    g.barrier()->wait();
  }, std::chrono::seconds(20), algorithm);
}

TEST_CASE("send and recv in either order do not deadlock", "[gloo]") {
  run_ranks(2, [](GlooProcessGroup& g) {
    const int peer = 1 - g.rank();
    std::vector<std::int64_t> out{g.rank() + 40, 7}, in(2);
    auto s = g.send(tensor_of(out, DType::kInt64), peer, 3);
    auto r = g.recv(tensor_of(in, DType::kInt64), peer, 3);
    s->wait();
    r->wait();
    CHECK(in == std::vector<std::int64_t>{peer + 40, 7});
  });
}

TEST_CASE("new_group makes a sub-group of the listed ranks; others get nullptr", "[gloo]") {
  run_ranks(4, [](GlooProcessGroup& g) {
    auto odd = g.new_group({1, 3});
    auto all = g.new_group({0, 1, 2, 3});
    if (g.rank() % 2 == 0) {
      CHECK(odd == nullptr);
    } else {
      REQUIRE(odd != nullptr);
      CHECK(odd->size() == 2);
      CHECK(odd->rank() == g.rank() / 2);
      std::vector<std::int32_t> v{g.rank()};
      odd->all_reduce(Tensor{v.data(), 1, DType::kInt32}, ReduceOp::kSum)->wait();
      CHECK(v[0] == 4);
    }
    std::vector<std::int32_t> w{1};
    all->all_reduce(Tensor{w.data(), 1, DType::kInt32}, ReduceOp::kSum)->wait();
    CHECK(w[0] == 4);
  });
}

TEST_CASE("a group of one rank completes every op locally", "[gloo]") {
  run_ranks(1, [](GlooProcessGroup& g) {
    std::vector<float> v{3.0f};
    g.all_reduce(tensor_of(v, DType::kFloat32), ReduceOp::kAvg)->wait();
    CHECK(v[0] == 3.0f);
    std::vector<float> out(1);
    g.all_gather(tensor_of(v, DType::kFloat32), tensor_of(out, DType::kFloat32))->wait();
    CHECK(out[0] == 3.0f);
    g.barrier()->wait();
  });
}

TEST_CASE("bad arguments are ConfigErrors naming the problem", "[gloo]") {
  run_ranks(1, [](GlooProcessGroup& g) {
    std::vector<float> v(2), out(3);
    CHECK_THROWS_WITH(g.all_gather(tensor_of(v, DType::kFloat32), tensor_of(out, DType::kFloat32)),
                      Catch::Contains("output must hold size() x input = 2 elements"));
    CHECK_THROWS_WITH(g.broadcast(tensor_of(v, DType::kFloat32), 1),
                      Catch::Contains("root 1 is outside the group of 1"));
    CHECK_THROWS_WITH(g.new_group({1, 0}), Catch::Contains("sorted, unique"));
    Tensor cuda{v.data(), 2, DType::kFloat32, DeviceKind::kCuda, 0};
    CHECK_THROWS_AS(g.all_reduce(cuda, ReduceOp::kSum), ConfigError);
  });
}
