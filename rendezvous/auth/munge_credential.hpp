#pragma once
// Munge credentials through libmunge (MUNGE, Debian's `munge`): what agents of one SLURM job
// present instead of a job secret while munged runs (docs/security.md, "Munge under SLURM").
// Each call is one round trip to the local munged over its UNIX socket; thread-safe.

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "rendezvous/auth/credentials.hpp"

namespace ddp::rdzv::auth {

// A credential over `payload` from the munged at `socket` ("" : libmunge's default socket),
// decodable only by processes of this user. Throws IoError naming the socket when munged cannot
// be reached or refuses.
std::string munge_encode(const std::string& socket, std::string_view payload);

// Why the munged at `socket` does not vouch for `credential` as one made by user `uid` over
// exactly `payload`; nullopt when it does. Forged, malformed, expired and replayed credentials
// (munge's own reasons), another user's and another payload's are refused; so is everything
// when munged cannot be reached.
std::optional<std::string> munge_refusal(const std::string& socket, const std::string& credential,
                                         std::string_view payload, uid_t uid);

// munge_refusal() bound to a socket and a user: how a server's admission decides a credential
// (ServerHandshake::kCheckMunge).
using MungeCheck = std::function<std::optional<std::string>(const std::string& credential,
                                                            std::string_view payload)>;

// The check a server with munge `credentials` decides credentials with: munge_refusal() through
// their socket, for this process's user (the job's).
MungeCheck munge_check_for(const Credentials& credentials);

// Why munge cannot be used through `socket` (munged is not running, or its socket is not
// reachable), or nullopt when munged encodes a credential.
std::optional<std::string> munge_unavailable(const std::string& socket);

}  // namespace ddp::rdzv::auth
