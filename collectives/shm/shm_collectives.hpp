#pragma once
// ShmCollectives: all_reduce, broadcast and all_gather among the ranks of one host through shared
// memory, with no TCP and no kernel copies. Each rank owns a segment of two slots that alternate
// from one chunk to the next, so a chunk never overwrites data a peer may still be reading.
// all_reduce, per chunk: every rank copies the parts of its chunk that its peers reduce into its
// slot, reduces its own 1/W share of the chunk across its chunk and the peers' slots, writes that
// share to its chunk and publishes it in its slot, and copies the others' shares out (two futex
// barriers). broadcast: the root copies a chunk into its slot, the others copy it out;
// all_gather: every rank copies a chunk of its input into its slot, every rank copies all slots
// out (one barrier a chunk each).
//
// Every element is reduced by exactly one rank in rank order (0 + 1 + 2 ...), so all ranks end
// with bitwise identical results.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collectives/reduce_functions.hpp"
#include "collectives/shm/shared_segment.hpp"
#include "ddp/process_group.hpp"
#include "rendezvous/store_client/blocking_store.hpp"

namespace ddp::coll::shm {

struct PeerFlags;

class ShmCollectives {
 public:
  static constexpr std::size_t kSlotBytes = std::size_t{4} << 20;
  // all_reduce reduces its share in blocks of this many bytes (a multiple of every element size).
  static constexpr std::size_t kBlockBytes = std::size_t{16} << 10;

  // Why connect() gave no transport.
  struct Refusal {
    bool elsewhere = false;  // not every rank is on this host: the usual multi-node case
    std::string reason;
    std::vector<std::string> domains;  // every rank's domain, by group rank (always filled)
  };

  // Collective: every rank of the group calls it with the same store (a prefix of its own). Gives
  // every rank a transport if all ranks share one domain and each mapped every peer's segment,
  // else nullptr on every rank, with the same `refusal.elsewhere` and `refusal.domains`
  // everywhere and a reason. `domain` is this rank's shared_memory_domain() (tests pretend other
  // hosts with other strings). `global_ranks` maps group ranks to job ranks, for messages.
  static std::unique_ptr<ShmCollectives> connect(rdzv::BlockingStore& store, int rank, int size,
                                                 const std::vector<int>& global_ranks,
                                                 std::chrono::milliseconds timeout,
                                                 Refusal& refusal, const std::string& domain);

  // Each operation is collective and works on CPU memory. They throw ddp::TimeoutError
  // "timed out ..." after `deadline`, or std::runtime_error naming a peer whose process exited,
  // or "aborted ..." once abort() was called.

  // In place over `t` with `reduce`; with `divide_by` > 1 (ReduceOp::kAvg) every result is then
  // divided by it as divide_by_count does, in the same pass over the share.
  void all_reduce(const Tensor& t, ReduceFn reduce, std::chrono::steady_clock::time_point deadline,
                  int divide_by = 1);
  // Returns once every rank has called it.
  void barrier(std::chrono::steady_clock::time_point deadline);
  // In place: every rank ends with group rank `root`'s `t`.
  void broadcast(const Tensor& t, int root, std::chrono::steady_clock::time_point deadline);
  // out.count == in.count * size(); rank r's `in` lands at out[r * in.count].
  void all_gather(const Tensor& in, const Tensor& out,
                  std::chrono::steady_clock::time_point deadline);

  // Any thread: the operation waiting on a peer, and every later one, throw within one nap.
  void abort() { aborted_.store(true); }

 private:
  ShmCollectives(int rank, std::vector<int> global_ranks, std::vector<SharedSegment> segments);
  std::byte* slot(int rank, int which) const;

  int rank_;
  int size_;
  std::vector<int> global_ranks_;
  std::vector<SharedSegment> segments_;  // by group rank; ours included
  std::vector<PeerFlags*> flags_;        // by group rank: the header of each segment
  std::uint32_t generation_ = 0;         // barriers passed
  std::uint64_t chunks_ = 0;             // chunks moved by any operation: picks the slot
  std::atomic<bool> aborted_{false};
};

}  // namespace ddp::coll::shm
