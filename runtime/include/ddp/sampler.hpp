#pragma once
// DistributedSampler: which dataset indices one rank visits in one epoch, index for index the
// same as PyTorch's torch.utils.data.DistributedSampler (torch.randperm under
// manual_seed(seed + epoch)).

#include <cstdint>
#include <vector>

namespace ddp {

struct SamplerOptions {
  std::int64_t dataset_size = 0;
  int num_replicas = 1;  // world size
  int rank = 0;
  bool shuffle = true;
  std::uint64_t seed = 0;
  bool drop_last = false;
};

// Not thread-safe; each rank owns one. Every rank and every world size shuffles the same
// permutation of the epoch; rank r takes positions r, r + W, r + 2W, ... of it. Without drop_last
// the permutation is padded by repeating its head so every rank gets num_samples() indices; with
// drop_last its tail is cut instead.
class DistributedSampler {
 public:
  // Throws ConfigError when rank is outside [0, num_replicas) or a size is negative.
  explicit DistributedSampler(const SamplerOptions& options);

  // Selects the permutation of `epoch` (seed + epoch), as PyTorch's set_epoch.
  void set_epoch(std::int64_t epoch) { epoch_ = epoch; }
  std::int64_t epoch() const { return epoch_; }

  // Indices per rank per epoch (PyTorch's len(sampler)).
  std::int64_t num_samples() const { return num_samples_; }
  // num_samples() * num_replicas.
  std::int64_t total_size() const { return num_samples_ * options_.num_replicas; }

  // This rank's indices for the current epoch, in visiting order.
  std::vector<std::int64_t> indices() const;

 private:
  SamplerOptions options_;
  std::int64_t epoch_ = 0;
  std::int64_t num_samples_ = 0;
};

// torch.randperm(n, generator=torch.Generator().manual_seed(seed)) on the CPU (PyTorch 1.13):
// a Fisher-Yates pass drawing 32-bit words from mt19937 seeded with the low 32 bits of `seed`.
std::vector<std::int64_t> torch_randperm(std::int64_t n, std::uint64_t seed);

}  // namespace ddp
