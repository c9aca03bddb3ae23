#pragma once
// ShmAllreduce: all_reduce among ranks of one host through shared memory, with no TCP and no
// kernel copies. Each rank owns a segment of two slots; per chunk of the tensor every rank copies
// its chunk into its slot, reduces its 1/W share of the chunk across all slots, publishes that
// share, and copies the others' shares out. Two futex barriers a chunk; the slots alternate, so
// a chunk never overwrites data a peer may still be reading.
//
// Every element is reduced by exactly one rank in rank order (0 + 1 + 2 ...), so all ranks end
// with bitwise identical results.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collectives/group_store.hpp"
#include "collectives/reduce_functions.hpp"
#include "collectives/shm/shared_segment.hpp"
#include "ddp/process_group.hpp"

namespace ddp::coll::shm {

struct PeerFlags;

class ShmAllreduce {
 public:
  static constexpr std::size_t kSlotBytes = std::size_t{4} << 20;

  // Collective: every rank of the group calls it with the same store (a prefix of its own). Gives
  // every rank a transport if all ranks share one shared_memory_domain() and each mapped every
  // peer's segment, else nullptr on every rank with the reason in `why_not`. `global_ranks` maps
  // group ranks to job ranks, for messages.
  static std::unique_ptr<ShmAllreduce> connect(GroupStore& store, int rank, int size,
                                               const std::vector<int>& global_ranks,
                                               std::chrono::milliseconds timeout,
                                               std::string& why_not);

  // In place over `t` (CPU memory) with `reduce`. Throws std::runtime_error "timed out ..." after
  // `deadline`, or naming a peer whose process exited.
  void all_reduce(const Tensor& t, ReduceFn reduce, std::chrono::steady_clock::time_point deadline);

 private:
  ShmAllreduce(int rank, std::vector<int> global_ranks, std::vector<SharedSegment> segments);
  std::byte* slot(int rank, int which) const;
  void barrier(std::chrono::steady_clock::time_point deadline);

  int rank_;
  int size_;
  std::vector<int> global_ranks_;
  std::vector<SharedSegment> segments_;  // by group rank; ours included
  std::vector<PeerFlags*> flags_;        // by group rank: the header of each segment
  std::uint32_t generation_ = 0;         // barriers passed
  std::uint64_t chunks_ = 0;             // chunks reduced: picks the slot
};

}  // namespace ddp::coll::shm
