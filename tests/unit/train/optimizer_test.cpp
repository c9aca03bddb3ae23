// SGD with momentum and AdamW against torch.optim on the same parameters and gradients (values
// printed by PyTorch 1.13: three steps of SGD(lr=0.1, momentum=0.9, weight_decay=0.01) and of
// AdamW(lr=0.01, weight_decay=0.05) from p = [0.5, -1.25, 2, 0.125]).

#include <catch2/catch.hpp>

#include <vector>

#include "apps/ddp-train/mlp.hpp"
#include "apps/ddp-train/optimizer.hpp"
#include "ddp/error.hpp"

namespace {

std::vector<float> three_steps(const ddp::train::OptimizerOptions& o) {
  std::vector<float> value{0.5f, -1.25f, 2.0f, 0.125f};
  std::vector<float> grad(4);
  std::vector<ddp::train::Parameter> params{{"p", {4}, value.data(), grad.data(), 4}};
  auto opt = ddp::train::make_optimizer(o, params);
  const std::vector<std::vector<float>> grads{
      {0.1f, -0.2f, 0.3f, -0.4f}, {0.05f, 0.5f, -0.25f, 0.0f}, {-0.3f, 0.1f, 0.2f, 0.7f}};
  for (std::size_t s = 0; s < grads.size(); ++s) {
    grad = grads[s];
    opt->step(params, static_cast<std::int64_t>(s + 1));
  }
  return value;
}

}  // namespace

TEST_CASE("sgd with momentum and weight decay follows torch.optim.SGD", "[optimizer]") {
  ddp::train::OptimizerOptions o;
  o.lr = 0.1f;
  o.momentum = 0.9f;
  o.weight_decay = 0.01f;
  const auto v = three_steps(o);
  const std::vector<float> torch{0.490640402f, -1.29381955f, 1.9350785f, 0.162547395f};
  for (std::size_t i = 0; i < v.size(); ++i) CHECK(v[i] == Approx(torch[i]).epsilon(1e-6));
}

TEST_CASE("adamw follows torch.optim.AdamW", "[optimizer]") {
  ddp::train::OptimizerOptions o;
  o.name = "adamw";
  o.lr = 0.01f;
  o.weight_decay = 0.05f;
  const auto v = three_steps(o);
  const std::vector<float> torch{0.483415425f, -1.24708354f, 1.98345423f, 0.138519824f};
  for (std::size_t i = 0; i < v.size(); ++i) CHECK(v[i] == Approx(torch[i]).epsilon(1e-6));
}

TEST_CASE("an unknown optimizer is named with the flag", "[optimizer]") {
  ddp::train::OptimizerOptions o;
  o.name = "lion";
  CHECK_THROWS_WITH(ddp::train::make_optimizer(o, {}),
                    "--optimizer: unknown optimizer 'lion' (sgd or adamw)");
}
