#pragma once
// ProcessGroup: collective communication among the ranks of a job (or a sub-group), the libddp
// public interface implemented by the Gloo (CPU) and NCCL (CUDA) backends in collectives/.
// Every operation is asynchronous and returns a Work handle; buffers must stay alive and untouched
// until the Work completes. A group is used from one thread at a time.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ddp {

enum class DType { kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kUInt8 };

inline std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::kFloat64:
    case DType::kInt64: return 8;
    case DType::kFloat32:
    case DType::kInt32: return 4;
    case DType::kFloat16:
    case DType::kBFloat16: return 2;
    case DType::kUInt8: return 1;
  }
  return 0;
}

enum class ReduceOp { kSum, kAvg, kMin, kMax, kProduct };

enum class DeviceKind { kCpu, kCuda };

// A typed view of memory owned by the caller: `count` elements of `dtype` at `data`, on the CPU or
// on CUDA device `device_index`.
struct Tensor {
  void* data = nullptr;
  std::size_t count = 0;
  DType dtype = DType::kFloat32;
  DeviceKind device = DeviceKind::kCpu;
  int device_index = 0;

  std::size_t bytes() const { return count * dtype_size(dtype); }
};

// The handle of one asynchronous operation.
class Work {
 public:
  virtual ~Work() = default;
  // Blocks until the operation completes. Throws TimeoutError naming the ranks that never arrived
  // once the group's timeout passes, IoError when a peer is gone.
  virtual void wait() = 0;
  // True once the operation has completed (successfully or not); never blocks.
  virtual bool is_completed() = 0;
  // Orders the operation before the work the caller queues next on the device's legacy default
  // stream, without blocking the host (NCCL); its errors and timeouts show at a later wait().
  // Host-memory backends have no stream to order: they wait().
  virtual void wait_on_stream() { wait(); }
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "gloo" or "nccl"

  // In place: every rank ends with op over all ranks' `t`.
  virtual std::shared_ptr<Work> all_reduce(Tensor t, ReduceOp op) = 0;
  // In place: every rank ends with root's `t`.
  virtual std::shared_ptr<Work> broadcast(Tensor t, int root) = 0;
  // out.count == in.count * size(); rank r's `in` lands at out[r * in.count].
  virtual std::shared_ptr<Work> all_gather(Tensor in, Tensor out) = 0;
  // in.count == out.count * size(); rank r receives op over all ranks' in[r * out.count ...].
  virtual std::shared_ptr<Work> reduce_scatter(Tensor in, Tensor out, ReduceOp op) = 0;
  virtual std::shared_ptr<Work> barrier() = 0;
  virtual std::shared_ptr<Work> send(Tensor t, int dst, int tag = 0) = 0;
  virtual std::shared_ptr<Work> recv(Tensor t, int src, int tag = 0) = 0;

  // A group of the listed global ranks (sorted, unique). Every rank of this group must call it
  // with the same list; ranks outside the list get nullptr.
  virtual std::shared_ptr<ProcessGroup> new_group(std::vector<int> ranks) = 0;

  // Thread-safe: the one call another thread may make while this group's thread uses it. Ends
  // the group for good: an operation blocked on it (a peer that died mid-collective) and every
  // later one fail with IoError. Returns false, doing nothing, where the backend has no abort
  // (NCCL and Gloo have one). Also aborts the groups made by new_group().
  virtual bool abort() { return false; }
  // True once abort() took effect. An operation that completed since then may hold partial
  // data (an aborted NCCL kernel returns without an error): check this before keeping results.
  virtual bool is_aborted() const { return false; }

  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }

 private:
  std::chrono::milliseconds timeout_{std::chrono::minutes(30)};
};

}  // namespace ddp
