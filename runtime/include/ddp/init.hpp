#pragma once
// ddp::init(): join the job a launcher (ddprun or torchrun) started this process in, in one call.

#include <chrono>
#include <memory>
#include <string>

#include "ddp/launch_env.hpp"
#include "ddp/process_group.hpp"
#include "ddp/reform_client.hpp"

namespace ddp {

struct InitOptions {
  std::string backend;  // "" = $DDP_BACKEND, else "nccl" when built with CUDA and a GPU is
                        // visible, else "gloo"
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};  // every collective
  std::chrono::milliseconds store_timeout{std::chrono::minutes(5)};
  // How long a failed Gloo collective waits for the other ranks' arrival marks to name those
  // that never came; in-process recovery (ddp-train) sets 0 to fail at once.
  std::chrono::milliseconds failure_report_grace{2000};
};

// What the launcher said (rank, world_size, local_rank, local_world_size, restart_count,
// master_addr, master_port: ddp/launch_env.hpp) and the job's default group.
struct Context : LaunchEnv {
  std::shared_ptr<ProcessGroup> group;  // the default group: every rank of the job
};

// Reads RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT and
// TORCHELASTIC_RESTART_COUNT, connects to the store under the prefix
// "ddp/attempt_<restart_count>/" and builds the default group. Applies SPDLOG_LEVEL (e.g.
// "coll=debug") to libddp's logs. Throws ConfigError naming a missing or malformed variable,
// TimeoutError/IoError naming the store or the missing ranks.
Context init(const InitOptions& options = {});

// Joins round `place.round` of ddprun's in-process recovery (ddp/reform_client.hpp): sets
// place.env in this process's environment (so RANK, WORLD_SIZE, ... read by anyone stay right),
// then as init() under the store prefix "ddp/reform/round_<round>/" (TORCHELASTIC_RESTART_COUNT
// stays the same across re-forms that spend no restart, and a group must not read an earlier
// round's keys). Throws as init().
Context init_at(const ReformPlace& place, const InitOptions& options = {});

}  // namespace ddp
