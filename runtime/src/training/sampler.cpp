// DistributedSampler, following torch/utils/data/distributed.py (PyTorch 1.13) step for step so
// that a C++ rank and a Python rank with the same seed read the same samples.

#include "ddp/sampler.hpp"

#include <fmt/format.h>

#include <random>
#include <utility>

#include "ddp/error.hpp"

namespace ddp {

std::vector<std::int64_t> torch_randperm(std::int64_t n, std::uint64_t seed) {
  std::vector<std::int64_t> perm(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) perm[static_cast<std::size_t>(i)] = i;
  // at::mt19937 seeds exactly like std::mt19937 with a 32-bit seed, and randperm_cpu swaps
  // position i with i + (random() % (n - i)) using one 32-bit draw per position.
  std::mt19937 gen(static_cast<std::uint32_t>(seed & 0xffffffffu));
  for (std::int64_t i = 0; i + 1 < n; ++i) {
    const auto z = static_cast<std::int64_t>(gen() % static_cast<std::uint64_t>(n - i));
    std::swap(perm[static_cast<std::size_t>(i)], perm[static_cast<std::size_t>(i + z)]);
  }
  return perm;
}

DistributedSampler::DistributedSampler(const SamplerOptions& options) : options_(options) {
  if (options.num_replicas < 1) {
    throw ConfigError(fmt::format("sampler: num_replicas must be >= 1, got {}",
                                  options.num_replicas));
  }
  if (options.rank < 0 || options.rank >= options.num_replicas) {
    throw ConfigError(fmt::format("sampler: rank {} is outside [0, {})", options.rank,
                                  options.num_replicas));
  }
  if (options.dataset_size < 0) {
    throw ConfigError(fmt::format("sampler: dataset_size must be >= 0, got {}",
                                  options.dataset_size));
  }
  const std::int64_t n = options.dataset_size;
  const std::int64_t w = options.num_replicas;
  if (options.drop_last && n % w != 0) {
    // PyTorch: math.ceil((len - W) / W), the largest even split that drops the tail.
    num_samples_ = (n - w + w - 1) / w;
  } else {
    num_samples_ = (n + w - 1) / w;
  }
}

std::vector<std::int64_t> DistributedSampler::indices() const {
  const std::int64_t n = options_.dataset_size;
  std::vector<std::int64_t> all;
  if (options_.shuffle) {
    all = torch_randperm(n, options_.seed + static_cast<std::uint64_t>(epoch_));
  } else {
    all.resize(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) all[static_cast<std::size_t>(i)] = i;
  }
  const auto total = static_cast<std::size_t>(total_size());
  if (!options_.drop_last) {
    // Pad by repeating the permutation from its start, as many times as needed.
    const std::size_t base = all.size();
    for (std::size_t i = 0; all.size() < total && base > 0; ++i) all.push_back(all[i % base]);
  } else {
    all.resize(total);
  }
  std::vector<std::int64_t> mine;
  mine.reserve(static_cast<std::size_t>(num_samples_));
  for (std::size_t i = static_cast<std::size_t>(options_.rank); i < total;
       i += static_cast<std::size_t>(options_.num_replicas)) {
    mine.push_back(all[i]);
  }
  return mine;
}

}  // namespace ddp
