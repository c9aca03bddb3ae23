#pragma once
// Credentials: what an agent proves it holds when it connects to a store of its job (the job
// secret and the run id it is bound to), and the process-wide default that every store client of
// the agent uses unless its ConnectOptions name others. The agent sets the default once, before
// its first connection, on its one thread.

#include <memory>
#include <string>

namespace ddp::rdzv::auth {

struct Credentials {
  std::string secret;  // the token file's contents (never sent)
  std::string run_id;  // --rdzv_id: a tag for one job is refused by another job's stores
};

// The credentials store clients of this process present by default; null when none were set
// (the job has no secret). Returns what set_default_credentials last set.
std::shared_ptr<const Credentials> default_credentials();
void set_default_credentials(std::shared_ptr<const Credentials> credentials);

}  // namespace ddp::rdzv::auth
