// NcclCommunicator. Non-blocking communicators let init and every call be bounded by a deadline
// instead of hanging when a rank never comes (NCCL's own bootstrap would wait indefinitely), and
// let another thread abort one that a dead peer left blocked (ncclCommAbort is the one call that
// blocks: it waits for the communicator's kernels and proxy to stop).
#include "collectives/nccl/nccl_communicator.hpp"

#include <fmt/format.h>

#include <thread>

#include "ddp/error.hpp"

namespace ddp::coll {

void check_cuda(cudaError_t status, const char* what, int device) {
  if (status != cudaSuccess) {
    throw IoError(fmt::format("{} on cuda:{}: {}", what, device, cudaGetErrorString(status)));
  }
}

NcclCommunicator::NcclCommunicator(const ncclUniqueId& id, int rank, int size, int device,
                                   Clock::time_point deadline)
    : device_(device) {
  check_cuda(cudaSetDevice(device), "cudaSetDevice", device);
  check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate",
             device);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  try {
    check(ncclCommInitRankConfig(&comm_, size, id, rank, &config), "ncclCommInitRank", deadline);
  } catch (...) {
    if (comm_ != nullptr && !aborted_.load()) ncclCommAbort(comm_);
    cudaStreamDestroy(stream_);
    throw;
  }
}

NcclCommunicator::~NcclCommunicator() {
  // No other thread holds this object now: no lock. A communicator with an asynchronous error
  // (a peer gone) may have kernels that never finish: synchronizing its stream would hang.
  if (comm_ != nullptr && !aborted_.load()) {
    ncclResult_t state = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &state) == ncclSuccess && state == ncclSuccess) {
      cudaStreamSynchronize(stream_);
      ncclCommDestroy(comm_);
    } else {
      ncclCommAbort(comm_);
    }
  }
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void NcclCommunicator::throw_if_aborted(const char* what) const {
  if (aborted_.load()) {
    throw IoError(fmt::format("nccl {} on cuda:{}: the communicator was aborted", what, device_));
  }
}

void NcclCommunicator::check(ncclResult_t result, const char* what, Clock::time_point deadline) {
  while (result == ncclInProgress) {
    if (Clock::now() >= deadline) {
      abort();
      throw TimeoutError(fmt::format("nccl {} on cuda:{} timed out", what, device_));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    std::lock_guard lock(mutex_);
    throw_if_aborted(what);
    if (ncclCommGetAsyncError(comm_, &result) != ncclSuccess) result = ncclInternalError;
  }
  if (result != ncclSuccess) {
    std::lock_guard lock(mutex_);
    throw_if_aborted(what);
    const char* last = ncclGetLastError(comm_);
    throw IoError(fmt::format("nccl {} on cuda:{} failed: {} ({})", what, device_,
                              ncclGetErrorString(result), last != nullptr ? last : ""));
  }
}

ncclResult_t NcclCommunicator::async_error() {
  std::lock_guard lock(mutex_);
  if (aborted_.load()) return ncclInvalidUsage;
  ncclResult_t state = ncclSuccess;
  if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) return ncclInternalError;
  return state;
}

void NcclCommunicator::abort() {
  std::lock_guard lock(mutex_);
  if (aborted_.exchange(true) || comm_ == nullptr) return;
  ncclCommAbort(comm_);
}

}  // namespace ddp::coll
