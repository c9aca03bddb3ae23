#pragma once
// The NCCL (CUDA) ProcessGroup, compiled whenever CUDA and NCCL are found (DDP_WITH_CUDA). This
// header is CUDA-free so that runtime/ can create the group without CUDA's headers.
//
// One communicator per group (the unique id travels through the group's store: rank 0 writes
// "nccl_id"), its own non-blocking CUDA stream on device `device` (LOCAL_RANK). Each operation
// first makes that stream wait for the work already queued on the device's legacy default stream,
// then enqueues the NCCL call; Work::wait() blocks the host until the operation finished on the
// GPU, and past the group's timeout aborts the communicator and throws TimeoutError naming the
// ranks that never arrived. abort() may come from any thread (ddp-train's recovery, when a peer
// is gone): the operation blocked on the group, and every later one, throws IoError.

#include <chrono>
#include <memory>

#include "ddp/process_group.hpp"
#include "rendezvous/store_client/blocking_store.hpp"

namespace ddp::coll {

// Collective over `store`: every rank calls it. Throws IoError/TimeoutError naming the device or
// the ranks that did not join within `timeout`.
std::shared_ptr<ProcessGroup> make_nccl_group(std::shared_ptr<rdzv::BlockingStore> store, int rank,
                                              int size, int device,
                                              std::chrono::milliseconds timeout);

}  // namespace ddp::coll
