#pragma once
// C10dSettings: the knobs of one elastic (c10d) rendezvous, in rendezvous terms. The agent fills
// them from --nnodes and --rdzv_conf (torchrun's keys and defaults); tests use short timeouts.

#include <chrono>
#include <cstdint>
#include <string>

#include "rendezvous/engine/round_settings.hpp"

namespace ddp::rdzv {

struct C10dSettings : RoundSettings {
  std::chrono::milliseconds close_timeout{std::chrono::seconds(30)};  // exit barrier's tail
  std::chrono::milliseconds keep_alive_interval{std::chrono::seconds(5)};
  int keep_alive_max_attempt = 3;  // missed beats before a node is declared lost
  // Most keys in one MULTI_GET or MULTI_SET of the closer (stores refuse more than 65,536 keys in
  // one request): it reads the descriptors and writes the places of a larger round in chunks.
  int max_keys_per_request = 16384;
  // Where the rendezvous store is (for MASTER_ADDR/PORT when no member hosts a worker store).
  std::string store_host;
  std::uint16_t store_port = 0;
};

// Whose heartbeats a member reads while a round of `size` members runs: join indices
// [first, first + count). Members form groups of consecutive join indices, at most
// kC10dWatchGroup each and at least two groups; the first member of each group reads every
// heartbeat of the next group in one MULTI_GET (the last group's first reads the first group), so
// every member is read by exactly one other and the store serves size / group reads a period.
// Everyone else reads nothing (count 0).
inline constexpr int kC10dWatchGroup = 32;
struct C10dWatched {
  int first = 0;
  int count = 0;
};
C10dWatched c10d_watched(int index, int size);

// Whether the member at join index `index` of a round of `size` waits on the round's change log
// (and proposes the next round's plan, c10d_reform.cpp) rather than on the next round's plan:
// the first two of each heartbeat group, so every member of a small round, 1 in 16 of a large.
bool c10d_reads_log(int index, int size);

// How often a reading member reads its group's heartbeats: half the keep-alive interval, at
// least 50 ms. (Changes to the round need no period: members wait on the change log, see
// c10d_monitor.cpp.)
std::chrono::milliseconds c10d_read_period(std::chrono::milliseconds keep_alive_interval);

// How often a node that waits for a round to close wakes to count the arrivals (and log them):
// progress_interval, but at least max_nodes / 5 ms (20 s at 100,000), so that the waiting
// nodes' wake-ups stay within 20,000 store requests a second (c10d_rendezvous.cpp).
std::chrono::milliseconds c10d_progress_period(std::chrono::milliseconds progress_interval,
                                               int max_nodes);

// This node as the other nodes see it.
struct C10dNode {
  std::string addr;  // advertised address (--local_addr, or the interface routing to the store)
  std::string name;  // unique in the job: "<addr>_<pid>" by default; used in logs and reports
  bool is_host = false;  // this agent hosts the rendezvous store (gets group rank 0)
  int rank_hint = -1;    // >= 0: members sort by it after the store host (see assign_ranks)
};

}  // namespace ddp::rdzv
