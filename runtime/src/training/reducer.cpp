// Reducer: bucket assignment as PyTorch's compute_bucket_assignment_by_size (reverse order, a
// small first bucket, close once full), and all-reduce launched from mark_ready.

#include "ddp/reducer.hpp"

#include <fmt/format.h>

#include <cstring>
#include <utility>

#include "common/check.hpp"
#include "ddp/error.hpp"

namespace ddp {

struct Reducer::Bucket {
  std::vector<std::size_t> slots;
  std::size_t count = 0;
  std::size_t pending = 0;    // gradients not yet ready in this backward
  float* in_place = nullptr;  // the first gradient, when the bucket is contiguous memory
  std::vector<float> packed;  // otherwise, a copy reduced in its place
  std::shared_ptr<Work> work;

  float* data() { return in_place != nullptr ? in_place : packed.data(); }
};

Reducer::Reducer(std::shared_ptr<ProcessGroup> group, std::vector<GradientSlot> slots,
                 const ReducerOptions& options)
    : group_(std::move(group)), slots_(std::move(slots)) {
  DDP_CHECK(group_ != nullptr, "reducer needs a process group");
  bucket_of_.resize(slots_.size());
  ready_.assign(slots_.size(), false);
  std::size_t cap = options.first_bucket_cap_bytes;
  std::size_t bytes = 0;
  for (std::size_t i = slots_.size(); i-- > 0;) {
    if (buckets_.empty() || bytes >= cap) {
      if (!buckets_.empty()) cap = options.bucket_cap_bytes;
      buckets_.push_back(std::make_unique<Bucket>());
      bytes = 0;
    }
    Bucket& b = *buckets_.back();
    b.slots.push_back(i);
    b.count += slots_[i].count;
    bytes += slots_[i].count * sizeof(float);
    bucket_of_[i] = buckets_.size() - 1;
  }
  on_device_ = !slots_.empty() && slots_.front().device == DeviceKind::kCuda;
  for (const GradientSlot& s : slots_) {
    if ((s.device == DeviceKind::kCuda) != on_device_ ||
        (on_device_ && s.device_index != slots_.front().device_index)) {
      throw ConfigError(fmt::format("reducer: gradient {} is on another device than gradient {}",
                                    s.name, slots_.front().name));
    }
  }
  for (auto& b : buckets_) {
    bool contiguous = true;
    for (std::size_t k = 1; k < b->slots.size(); ++k) {
      const GradientSlot& prev = slots_[b->slots[k - 1]];
      contiguous = contiguous && prev.grad + prev.count == slots_[b->slots[k]].grad;
    }
    if (contiguous) {
      b->in_place = slots_[b->slots.front()].grad;
    } else if (on_device_) {
      std::vector<std::string> names;
      for (std::size_t s : b->slots) names.push_back(slots_[s].name);
      throw ConfigError(fmt::format(
          "reducer: CUDA gradients {} share a bucket but are not adjacent in memory (in reverse "
          "order); lay them out contiguously",
          fmt::join(names, ", ")));
    } else {
      b->packed.resize(b->count);
    }
    b->pending = b->slots.size();
  }
}

Reducer::~Reducer() {
  // A backward abandoned by an exception may leave all-reduces in flight on our buffers; they must
  // finish before the buffers go away.
  for (auto& b : buckets_) in_flight_.push_back(std::move(b->work));
  for (auto& work : in_flight_) {
    if (work) {
      try {
        work->wait();
      } catch (const std::exception&) {
      }
    }
  }
}

void Reducer::mark_ready(std::size_t slot) {
  if (!require_sync_) return;
  DDP_CHECK(slot < slots_.size(), "gradient slot {} out of range", slot);
  DDP_CHECK(!ready_[slot], "gradient {} marked ready twice in one backward", slots_[slot].name);
  ready_[slot] = true;
  Bucket& b = *buckets_[bucket_of_[slot]];
  if (--b.pending == 0) launch(b);
}

void Reducer::launch(Bucket& b) {
  if (b.in_place == nullptr) {
    std::size_t off = 0;
    for (std::size_t s : b.slots) {
      std::memcpy(b.packed.data() + off, slots_[s].grad, slots_[s].count * sizeof(float));
      off += slots_[s].count;
    }
  }
  Tensor t;
  t.data = b.data();
  t.count = b.count;
  t.dtype = DType::kFloat32;
  if (on_device_) {
    t.device = DeviceKind::kCuda;
    t.device_index = slots_.front().device_index;
  }
  // Averaged by the backend: on the device for NCCL, and for shared memory within the pass that
  // reduces each share, so the host makes no extra pass over the gradients.
  b.work = group_->all_reduce(t, ReduceOp::kAvg);
}

void Reducer::finalize() {
  if (!require_sync_) return;
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    if (!ready_[i]) {
      throw InternalError(fmt::format(
          "reducer: gradient {} was never marked ready in this backward (unused parameter?)",
          slots_[i].name));
    }
  }
  // The previous step's device all-reduces finished long ago in a healthy job; waiting for them
  // here keeps a peer's failure or a timeout from going unnoticed.
  for (auto& work : std::exchange(in_flight_, {})) work->wait();
  for (auto& b : buckets_) {
    std::shared_ptr<Work> work = std::move(b->work);
    b->pending = b->slots.size();
    if (on_device_) {  // in place: nothing left for the host to do with it
      work->wait_on_stream();
      in_flight_.push_back(std::move(work));
      continue;
    }
    work->wait();
    if (b->in_place == nullptr) {
      std::size_t off = 0;
      for (std::size_t s : b->slots) {
        std::memcpy(slots_[s].grad, b->packed.data() + off, slots_[s].count * sizeof(float));
        off += slots_[s].count;
      }
    }
  }
  ready_.assign(slots_.size(), false);
}

std::vector<std::vector<std::size_t>> Reducer::bucket_slots() const {
  std::vector<std::vector<std::size_t>> out;
  for (const auto& b : buckets_) out.push_back(b->slots);
  return out;
}

}  // namespace ddp
