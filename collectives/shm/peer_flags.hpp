#pragma once
// PeerFlags: the header at the start of every rank's shared segment, and the cross-process
// barrier built on it. A rank announces that it reached barrier number g by storing g in its own
// `generation`; peers wait for that value, spinning briefly and then sleeping on a futex, and
// check every few milliseconds that the rank they wait for is still alive and that the wait was
// not aborted.

#include <atomic>
#include <chrono>
#include <cstdint>

namespace ddp::coll::shm {

struct alignas(64) PeerFlags {
  std::atomic<std::uint32_t> generation{0};  // the last barrier this rank reached
  std::atomic<std::uint32_t> sleepers{0};    // peers asleep on `generation` (wake only if any)
  std::int32_t pid = 0;                      // the owner, for liveness checks
};
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);

// Stores `generation` in `mine` and wakes the peers that sleep on it.
void announce(PeerFlags& mine, std::uint32_t generation);

// Returns once `peer` (job rank `rank`) has announced `generation` (or a later one). Throws
// ddp::TimeoutError "timed out waiting for rank R" after `deadline`, or std::runtime_error
// "rank R (pid P) exited" when its process is gone, or "aborted while waiting for rank R" once
// `aborted` is set (seen within one nap, 20 ms).
void await(PeerFlags& peer, std::uint32_t generation,
           std::chrono::steady_clock::time_point deadline, int rank,
           const std::atomic<bool>& aborted);

}  // namespace ddp::coll::shm
