#pragma once
// Credentials: what an agent proves when it connects to a store of its job (the job secret, or
// a munge credential from the local munged under SLURM, bound to the run id), and the
// process-wide default that every store client of the agent uses unless its ConnectOptions name
// others. The agent sets the default once, before its first connection, on its one thread.

#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace ddp::rdzv::auth {

struct Credentials {
  std::string secret;  // the token file's contents (never sent); empty with munge
  std::string run_id;  // --rdzv_id: a tag for one job is refused by another job's stores
  // Set: authenticate with munge credentials instead of a secret, through the munged listening
  // on this socket ("" for libmunge's default, /run/munge/munge.socket.2). A server with these
  // accepts a credential only from its own user (the job's), fresh and never seen before.
  std::optional<std::string> munge_socket = std::nullopt;

  bool uses_munge() const { return munge_socket.has_value(); }
};

namespace detail {
inline std::shared_ptr<const Credentials> process_credentials;  // tests set and reset it too
}  // namespace detail

// The credentials store clients of this process present by default; null when none were set
// (the job has no secret). Returns what set_default_credentials last set.
inline std::shared_ptr<const Credentials> default_credentials() {
  return detail::process_credentials;
}
inline void set_default_credentials(std::shared_ptr<const Credentials> credentials) {
  detail::process_credentials = std::move(credentials);
}

}  // namespace ddp::rdzv::auth
