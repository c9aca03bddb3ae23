#pragma once
// The credentials an agent of a job presents to its job's stores, chosen once by the agent
// before it connects anywhere (docs/security.md):
//   1. the job secret from --rdzv_conf token_file, else $DDPRUN_TOKEN_FILE;
//   2. else, under SLURM ($SLURM_JOB_ID set) while munged answers on its socket
//      ($DDPRUN_MUNGE_SOCKET, else libmunge's default /run/munge/munge.socket.2), munge
//      credentials: no configuration, every agent of the job runs as the job's user;
//   3. else none: the stores are open as before (the host warns).

#include <memory>
#include <optional>
#include <string>

#include "rendezvous/auth/credentials.hpp"

namespace ddp::rdzv::auth {

// As above, bound to `run_id`; null for 3. Throws ConfigError for a bad token file.
std::shared_ptr<const Credentials> job_credentials(const std::optional<std::string>& token_file,
                                                   const std::string& run_id);

}  // namespace ddp::rdzv::auth
