#pragma once
// NcclCommunicator: one non-blocking NCCL communicator and its CUDA stream, with calls checked
// against a deadline (a non-blocking communicator may answer ncclInProgress: the call is polled to
// completion). Errors become ddp::IoError / ddp::TimeoutError naming the call.

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <string>

namespace ddp::coll {

class NcclCommunicator {
 public:
  using Clock = std::chrono::steady_clock;

  // Joins communicator `id` as `rank` of `size` on `device`; gives up at `deadline`.
  NcclCommunicator(const ncclUniqueId& id, int rank, int size, int device,
                   Clock::time_point deadline);
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  ncclComm_t comm() const { return comm_; }
  cudaStream_t stream() const { return stream_; }
  int device() const { return device_; }

  // Waits out ncclInProgress for `result` of call `what`; throws on any error or at `deadline`.
  void check(ncclResult_t result, const char* what, Clock::time_point deadline);
  // The communicator's asynchronous error (ncclSuccess when none).
  ncclResult_t async_error();
  // Aborts the communicator (after a timeout); later calls fail.
  void abort();

 private:
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  int device_;
  bool aborted_ = false;
};

// Throws IoError "<what> on cuda:<device>: <cuda message>" unless status is cudaSuccess.
void check_cuda(cudaError_t status, const char* what, int device);

}  // namespace ddp::coll
