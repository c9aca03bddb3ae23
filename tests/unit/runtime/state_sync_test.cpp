// ddp::sync_state over real Gloo groups, every rank a thread of this process.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "ddp/state_sync.hpp"
#include "tests/unit/collectives/rank_threads.hpp"

using ddp::coll::GlooProcessGroup;
using ddp::coll::test::run_ranks;

TEST_CASE("most_committed_rank picks the lowest rank holding the most commits", "[sync]") {
  CHECK(ddp::most_committed_rank({0, 0, 0}) == 0);
  CHECK(ddp::most_committed_rank({0, 12, 12, 3}) == 1);
  CHECK(ddp::most_committed_rank({5, 4, 9}) == 2);
}

TEST_CASE("sync_state gives every rank the state of the rank with the most commits", "[sync]") {
  // Rank 2 committed the most; rank 0, a newcomer, has none.
  const std::vector<std::int64_t> commits{0, 7, 9, 9};
  run_ranks(4, [&](GlooProcessGroup& g) {
    const int r = g.rank();
    std::vector<float> weights(1000, static_cast<float>(r));
    std::vector<std::int64_t> position{r, 10 * r};
    const ddp::SyncResult result =
        ddp::sync_state(g, commits[static_cast<std::size_t>(r)],
                        {{weights.data(), weights.size(), ddp::DType::kFloat32},
                         {position.data(), position.size(), ddp::DType::kInt64}});
    CHECK(result.root == 2);
    CHECK(result.commits == 9);
    CHECK(weights == std::vector<float>(1000, 2.0f));
    CHECK(position == std::vector<std::int64_t>{2, 20});
  });
}

TEST_CASE("sync_state runs the count exchange through the caller's exchange", "[sync]") {
  run_ranks(2, [&](GlooProcessGroup& g) {
    int exchanges = 0;
    auto exchange = [&](ddp::Tensor host,
                        const std::function<std::shared_ptr<ddp::Work>(ddp::Tensor)>& op) {
      ++exchanges;
      op(host)->wait();
    };
    std::vector<float> w(3, static_cast<float>(g.rank() + 1));
    const auto result = ddp::sync_state(g, g.rank() == 1 ? 4 : 1,
                                        {{w.data(), w.size(), ddp::DType::kFloat32}}, exchange);
    CHECK(exchanges == 1);
    CHECK(result.root == 1);
    CHECK(w == std::vector<float>(3, 2.0f));
  });
}
