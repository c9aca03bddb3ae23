// TrainCommit (in-process recovery's in-memory commit) and the re-sharding of an epoch position.

#include <catch2/catch.hpp>

#include <vector>

#include "apps/ddp-train/mlp.hpp"
#include "apps/ddp-train/optimizer.hpp"
#include "apps/ddp-train/train_commit.hpp"
#include "apps/ddp-train/train_state.hpp"
#include "ddp/error.hpp"

using namespace ddp::train;

namespace {

struct Run {
  Mlp model{{4, 3, 2}};
  OptimizerOptions options;
  std::unique_ptr<Optimizer> optimizer;
  explicit Run(std::uint64_t seed) {
    model.init(seed);
    optimizer = make_optimizer(options, model.parameters());
  }
  TrainCommit commit() {
    return TrainCommit(model, *optimizer,
                       make_checkpoint(model, *optimizer, {}, 1, 8, 1, options.name, 0));
  }
  // Changes the weights and the optimizer's momentum, as a step does.
  void perturb(float by) {
    for (float& v : model.flat_values()) v += by;
    for (const StateTensor& s : optimizer->state()) {
      for (std::size_t i = 0; i < s.count; ++i) s.data[i] += by;
    }
  }
};

}  // namespace

TEST_CASE("restore returns the model, the optimizer and the position of the last commit",
          "[commit]") {
  Run run(1);
  TrainCommit commit = run.commit();
  run.perturb(0.5f);
  commit.take({{0, 12, 40}, 3});
  const std::vector<float> committed = run.model.flat_values();
  const std::vector<float> momentum(run.optimizer->state()[0].data,
                                    run.optimizer->state()[0].data + run.optimizer->state()[0].count);
  run.perturb(1.0f);  // a step that failed midway
  const CommitPosition at = commit.restore();
  CHECK(run.model.flat_values() == committed);
  CHECK(std::vector<float>(run.optimizer->state()[0].data,
                           run.optimizer->state()[0].data + run.optimizer->state()[0].count) ==
        momentum);
  CHECK(at.pos.step == 12);
  CHECK(at.pos.micro_in_epoch == 40);
  CHECK(at.world_size == 3);
  CHECK(commit.count() == 1);
  commit.take({{0, 13, 43}, 3}, 9);  // after a sync: the sender's count
  CHECK(commit.count() == 9);
}

TEST_CASE("a commit written to a checkpoint loads into another process's commit", "[commit]") {
  Run giver(1);
  TrainCommit given = giver.commit();
  giver.perturb(0.25f);
  given.take({{1, 700, 5}, 2}, 41);
  Run taker(2);  // a new process: another init, no commits
  TrainCommit taken = taker.commit();
  taken.load(given.checkpoint());
  CHECK(taken.count() == 41);
  const CommitPosition at = taken.restore();
  CHECK(taker.model.flat_values() == giver.model.flat_values());
  CHECK(at.pos.epoch == 1);
  CHECK(at.pos.step == 700);
  CHECK(at.world_size == 2);
}

TEST_CASE("a commit of another model is refused, naming the tensor and its shapes", "[commit]") {
  Run run(1);
  TrainCommit commit = run.commit();
  Mlp other({4, 5, 2});
  other.init(0);
  auto opt = make_optimizer({}, other.parameters());
  TrainCommit wrong(other, *opt, make_checkpoint(other, *opt, {}, 1, 8, 1, "sgd", 0));
  wrong.take({{}, 1});
  CHECK_THROWS_WITH(commit.load(wrong.checkpoint()), Catch::Contains("has shape"));
}

TEST_CASE("reshard_micro keeps the global epoch position when the world changes", "[commit]") {
  CHECK(reshard_micro(100, 3, 2) == 150);  // 100 micro-batches x 3 ranks = 150 x 2
  CHECK(reshard_micro(100, 2, 3) == 66);   // rounds down: at most one micro-batch seen again
  CHECK(reshard_micro(0, 3, 4) == 0);
  CHECK(reshard_micro(37, 4, 4) == 37);
}
