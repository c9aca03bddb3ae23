#pragma once
// Reducer: DDP's gradient synchronisation. Gradients are grouped into buckets in reverse
// parameter order (the order backward produces them); the moment a bucket's last gradient is
// marked ready, its all-reduce starts asynchronously on the process group, so communication
// overlaps the rest of backward. finalize() waits and leaves every gradient averaged over ranks.
// Used from the training thread only.

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "ddp/process_group.hpp"

namespace ddp {

// A gradient the reducer synchronises: float32 memory owned by the model, on the CPU or on CUDA
// device `device_index` (every slot of one reducer on the same device).
struct GradientSlot {
  std::string name;
  float* grad = nullptr;
  std::size_t count = 0;
  DeviceKind device = DeviceKind::kCpu;
  int device_index = 0;
};

struct ReducerOptions {
  std::size_t bucket_cap_bytes = 25u << 20;       // --bucket_cap_mb (PyTorch: 25 MiB)
  std::size_t first_bucket_cap_bytes = 1u << 20;  // PyTorch's _DEFAULT_FIRST_BUCKET_BYTES
};

class Reducer {
 public:
  // `slots` in model (forward) order. Buckets are filled in reverse order: a gradient joins the
  // open bucket, which closes once it holds at least its cap (so one large gradient gets a bucket
  // of its own). A bucket whose gradients are adjacent in memory, in reverse order, is reduced in
  // place; any other is packed into a buffer of the reducer's. Every bucket is reduced with
  // ReduceOp::kAvg, so the backend does the averaging (on the device for NCCL; for shared memory
  // within its reducing pass). CUDA gradients are reduced in place only: a bucket of them that is
  // not contiguous is a ConfigError naming its gradients. REQUIRES: group outlives *this.
  Reducer(std::shared_ptr<ProcessGroup> group, std::vector<GradientSlot> slots,
          const ReducerOptions& options = {});
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // no_sync: while false, mark_ready() and finalize() do nothing and gradients accumulate locally
  // (PyTorch's `with model.no_sync():`). Set it before backward starts.
  void set_require_sync(bool require) { require_sync_ = require; }
  bool requires_sync() const { return require_sync_; }

  // Called by backward when gradient `slot` (an index into the constructor's slots) is final.
  // Starts the bucket's all-reduce once all of its gradients are ready. Throws InternalError when a
  // gradient is marked twice in one backward.
  void mark_ready(std::size_t slot);

  // Waits for every bucket, divides by the world size and unpacks packed buckets, then resets for
  // the next backward. CUDA gradients are not waited for on the host: the averaged gradients are
  // ordered before what the caller queues next on the legacy default stream, and the host waits
  // for them at the next finalize() (or destruction), where a failure or timeout then surfaces.
  // Throws InternalError naming a gradient never marked ready; TimeoutError or IoError from the
  // group.
  void finalize();

  // The slots of each bucket, in the order buckets are reduced (for logs and tests).
  std::vector<std::vector<std::size_t>> bucket_slots() const;

 private:
  struct Bucket;
  void launch(Bucket& bucket);

  std::shared_ptr<ProcessGroup> group_;
  std::vector<GradientSlot> slots_;
  std::vector<std::unique_ptr<Bucket>> buckets_;
  std::vector<std::size_t> bucket_of_;  // slot -> bucket index
  std::vector<bool> ready_;
  bool require_sync_ = true;
  bool on_device_ = false;  // CUDA gradients: reduced in place only
  std::vector<std::shared_ptr<Work>> in_flight_;  // CUDA: the last finalize's, host-waited next
};

}  // namespace ddp
