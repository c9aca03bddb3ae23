#pragma once
// NcclCommunicator: one non-blocking NCCL communicator and its CUDA stream, with calls checked
// against a deadline (a non-blocking communicator may answer ncclInProgress: the call is polled to
// completion). Errors become ddp::IoError / ddp::TimeoutError naming the call.
//
// Threads: the group's thread makes every call but abort(), which any thread may make while the
// group's thread is inside another (a collective blocked on a dead peer). A mutex is held around
// each NCCL call on the communicator, so an abort never frees it under one; the host never
// blocks inside NCCL while holding it (a non-blocking communicator returns at once).

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>

namespace ddp::coll {

class NcclCommunicator {
 public:
  using Clock = std::chrono::steady_clock;

  // Joins communicator `id` as `rank` of `size` on `device`; gives up at `deadline`.
  NcclCommunicator(const ncclUniqueId& id, int rank, int size, int device,
                   Clock::time_point deadline);
  // Destroys the communicator once its stream is idle; aborts it instead when it holds an
  // asynchronous error (its stream may never drain).
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  cudaStream_t stream() const { return stream_; }
  int device() const { return device_; }

  // Enqueues `call(comm, stream)` (one NCCL operation) and waits out its ncclInProgress. Throws
  // IoError when the communicator was aborted or the call fails; TimeoutError at `deadline`.
  template <class Call>
  void launch(const char* what, Call&& call, Clock::time_point deadline) {
    ncclResult_t result;
    {
      std::lock_guard lock(mutex_);
      throw_if_aborted(what);
      result = call(comm_, stream_);
    }
    check(result, what, deadline);
  }

  // Waits out ncclInProgress for `result` of call `what`; throws on any error, when the
  // communicator is aborted meanwhile, or at `deadline` (aborting it).
  void check(ncclResult_t result, const char* what, Clock::time_point deadline);
  // The communicator's asynchronous error (ncclSuccess when none; ncclInvalidUsage once aborted).
  ncclResult_t async_error();
  // Any thread: aborts the communicator (idempotent); blocked and later operations fail. The
  // flag is set before NCCL is told, so a kernel that the abort ends is seen as aborted.
  void abort();
  bool is_aborted() const { return aborted_.load(); }

 private:
  // REQUIRES: mutex_ held.
  void throw_if_aborted(const char* what) const;

  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  int device_;
  std::mutex mutex_;  // held around each NCCL call on comm_ after construction
  std::atomic<bool> aborted_{false};
};

// Throws IoError "<what> on cuda:<device>: <cuda message>" unless status is cudaSuccess.
void check_cuda(cudaError_t status, const char* what, int device);

}  // namespace ddp::coll
