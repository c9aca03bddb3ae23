// Munge is probed, not configured: a site that runs munged for SLURM gets authenticated stores
// with no flag, and a machine without it (a laptop, a cluster on another launcher) gets today's
// open stores. Both sides follow the server: a store whose host found munge asks for a
// credential, and an agent that holds none is told so in one line (store_connection.cpp).

#include "rendezvous/auth/job_credentials.hpp"

#include <cstdlib>

#include "common/log.hpp"
#include "rendezvous/auth/munge_credential.hpp"
#include "rendezvous/auth/token_file.hpp"

namespace ddp::rdzv::auth {

std::shared_ptr<const Credentials> job_credentials(const std::optional<std::string>& token_file,
                                                   const std::string& run_id) {
  if (auto secret = job_secret(token_file)) {
    return std::make_shared<const Credentials>(Credentials{std::move(*secret), run_id, {}});
  }
  const char* job = std::getenv("SLURM_JOB_ID");
  if (job == nullptr || *job == '\0') return nullptr;
  const char* socket_env = std::getenv("DDPRUN_MUNGE_SOCKET");
  const std::string socket = socket_env != nullptr ? socket_env : "";
  if (const auto why = munge_unavailable(socket)) {
    log::get("rdzv")->info("SLURM job {} without a token file: munge is not usable ({}), so the "
                           "job's stores are not authenticated",
                           job, *why);
    return nullptr;
  }
  log::get("rdzv")->info("SLURM job {}: agents authenticate with munge credentials ({})", job,
                         socket.empty() ? "munged at libmunge's default socket"
                                        : "munged at " + socket);
  return std::make_shared<const Credentials>(Credentials{{}, run_id, socket});
}

}  // namespace ddp::rdzv::auth
