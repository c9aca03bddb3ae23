#pragma once
// The round protocols' logger ("rdzv") and the seconds their messages show, one definition for
// the files of c10d/ and etcd/ (a unity build puts a target's files in one translation unit,
// where file-local copies would collide).

#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>

#include "common/log.hpp"
#include "rendezvous/rendezvous.hpp"

namespace ddp::rdzv {

inline std::shared_ptr<spdlog::logger> logger() { return log::get("rdzv"); }

// The line a node logs once it has its place in a round it joined ("round closed") or derived from
// round `from` without `lost` members ("round derived"). (Built outside the coroutines: GCC 12
// miscompiles some format calls inside them.)
inline void log_round_closed(const RendezvousInfo& info) {
  logger()->info(
      "round closed run={} round={} group_rank={} group_world_size={} world_size={} "
      "restart_count={} master={}:{}",
      info.run_id, info.round, info.group_rank, info.group_world_size, info.world_size,
      info.restart_count, info.master_addr, info.master_port);
}
inline void log_round_derived(const RendezvousInfo& info, int from, std::size_t lost) {
  logger()->info(
      "round derived run={} round={} from={} lost={} group_rank={} group_world_size={} "
      "world_size={} restart_count={} master={}:{}",
      info.run_id, info.round, from, lost, info.group_rank, info.group_world_size, info.world_size,
      info.restart_count, info.master_addr, info.master_port);
}

// A duration as fractional seconds, for a message ("waiting up to {:.1f} s").
inline double seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace ddp::rdzv
