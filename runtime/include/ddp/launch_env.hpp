#pragma once
// What the launcher (ddprun or torchrun) tells each worker through its environment, read without
// joining the job: no store, no process group.

#include <string>

namespace ddp {

struct LaunchEnv {
  int rank = 0;              // RANK
  int world_size = 1;        // WORLD_SIZE
  int local_rank = 0;        // LOCAL_RANK
  int local_world_size = 1;  // LOCAL_WORLD_SIZE
  int restart_count = 0;     // TORCHELASTIC_RESTART_COUNT (0 when unset)
  std::string master_addr;   // MASTER_ADDR
  int master_port = 0;       // MASTER_PORT
};

// Reads the variables above. Throws ConfigError naming a variable that is missing, not an
// integer, or out of range (RANK not below WORLD_SIZE, LOCAL_RANK not below LOCAL_WORLD_SIZE).
LaunchEnv read_launch_env();

}  // namespace ddp
