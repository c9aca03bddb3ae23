// Mlp: backward against central finite differences of the forward loss, the reverse order in
// which gradients become ready, and the layout the reducer relies on.

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "apps/ddp-train/mlp.hpp"
#include "ddp/error.hpp"

using ddp::train::Mlp;

namespace {

struct Batch {
  std::vector<float> x;
  std::vector<std::int32_t> y;
  int size;
};

Batch random_batch(int size, int features, int classes, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  Batch b{{}, {}, size};
  for (int i = 0; i < size * features; ++i) b.x.push_back(normal(gen));
  for (int i = 0; i < size; ++i) b.y.push_back(static_cast<std::int32_t>(gen() % classes));
  return b;
}

double mean_loss(Mlp& m, const Batch& b) {
  return m.forward(b.x.data(), b.y.data(), b.size).loss_sum / b.size;
}

}  // namespace

TEST_CASE("backward matches finite differences of the loss for every parameter", "[mlp]") {
  Mlp m({6, 5, 4, 3});
  m.init(11);
  const Batch b = random_batch(7, 6, 3, 5);
  m.zero_grad();
  m.forward(b.x.data(), b.y.data(), b.size);
  m.backward(1.0f, nullptr);
  const double eps = 1e-2;
  int checked = 0;
  for (auto& p : m.parameters()) {
    for (std::size_t i = 0; i < p.count; ++i) {
      const float saved = p.value[i];
      p.value[i] = saved + static_cast<float>(eps);
      const double up = mean_loss(m, b);
      p.value[i] = saved - static_cast<float>(eps);
      const double down = mean_loss(m, b);
      p.value[i] = saved;
      const double numeric = (up - down) / (2 * eps);
      INFO(p.name << "[" << i << "] analytic=" << p.grad[i] << " numeric=" << numeric);
      CHECK(p.grad[i] == Approx(numeric).margin(2e-3).epsilon(2e-2));
      ++checked;
    }
  }
  CHECK(checked == (6 * 5 + 5) + (5 * 4 + 4) + (4 * 3 + 3));
}

TEST_CASE("gradients accumulate across backward calls and scale with loss_scale", "[mlp]") {
  Mlp m({4, 3, 2});
  m.init(1);
  const Batch b = random_batch(5, 4, 2, 9);
  m.zero_grad();
  m.forward(b.x.data(), b.y.data(), b.size);
  m.backward(1.0f, nullptr);
  const std::vector<float> once = m.flat_grads();
  m.zero_grad();
  for (int k = 0; k < 2; ++k) {
    m.forward(b.x.data(), b.y.data(), b.size);
    m.backward(0.5f, nullptr);
  }
  for (std::size_t i = 0; i < once.size(); ++i) CHECK(m.flat_grads()[i] == Approx(once[i]));
}

TEST_CASE("backward without accumulate overwrites stale gradients", "[mlp]") {
  Mlp m({4, 3, 2});
  m.init(1);
  const Batch b = random_batch(5, 4, 2, 9);
  m.zero_grad();
  m.forward(b.x.data(), b.y.data(), b.size);
  m.backward(1.0f, nullptr);
  const std::vector<float> once = m.flat_grads();
  for (float& g : m.flat_grads()) g = 123.0f;
  m.backward(1.0f, nullptr, false);
  CHECK(m.flat_grads() == once);
}

TEST_CASE("gradients become ready last layer first, each slot once", "[mlp]") {
  Mlp m({4, 3, 3, 2});
  m.init(2);
  const Batch b = random_batch(2, 4, 2, 1);
  m.forward(b.x.data(), b.y.data(), b.size);
  std::vector<std::size_t> order;
  m.backward(1.0f, [&](std::size_t i) { order.push_back(i); });
  CHECK(order == std::vector<std::size_t>{5, 4, 3, 2, 1, 0});
}

TEST_CASE("gradients of consecutive parameters in reverse order are adjacent", "[mlp]") {
  Mlp m({784, 1024, 1024, 10});
  const auto& p = m.parameters();
  REQUIRE(p.size() == 6);
  CHECK(p[5].grad == m.flat_grads().data());
  for (std::size_t i = p.size() - 1; i > 0; --i) CHECK(p[i].grad + p[i].count == p[i - 1].grad);
  CHECK(p[0].name == "0.weight");
  CHECK(p[0].shape == std::vector<std::int64_t>{1024, 784});
  CHECK(p[5].name == "4.bias");
}

TEST_CASE("init is the same for the same seed and within torch's Linear bounds", "[mlp]") {
  Mlp a({10, 8, 2});
  Mlp b({10, 8, 2});
  a.init(42);
  b.init(42);
  CHECK(a.flat_values() == b.flat_values());
  for (std::size_t i = 0; i < a.parameters()[0].count; ++i) {
    CHECK(std::fabs(a.parameters()[0].value[i]) <= 1.0f / std::sqrt(10.0f));
  }
  b.init(43);
  CHECK(a.flat_values() != b.flat_values());
}

TEST_CASE("a model needs positive widths", "[mlp]") {
  CHECK_THROWS_AS(Mlp({784}), ddp::ConfigError);
  CHECK_THROWS_AS(Mlp({784, 0, 10}), ddp::ConfigError);
}
