#pragma once
// The job secret's file: --rdzv_conf=token_file=PATH, else $DDPRUN_TOKEN_FILE. Read once by the
// agent when it makes its rendezvous.

#include <optional>
#include <string>

namespace ddp::rdzv::auth {

inline constexpr std::size_t kMinSecretBytes = 16;
inline constexpr std::size_t kMaxSecretBytes = 4096;

// The secret in the file at `path`, trailing whitespace (a newline) removed. `source` names
// where the path came from in errors ("--rdzv_conf token_file", "DDPRUN_TOKEN_FILE"). Throws
// ConfigError, one line naming the source and the path, when the file cannot be read, is not a
// regular file, is not owned by this user, can be read or written by group or others (mode & 077),
// or holds fewer than `min_bytes` (etcd's password_file: 1) or more than kMaxSecretBytes.
std::string read_token_file(const std::string& path, const std::string& source,
                            std::size_t min_bytes = kMinSecretBytes);

// The token file the agent uses: `conf_value` (from --rdzv_conf token_file) when given, else
// $DDPRUN_TOKEN_FILE when set and non-empty; nullopt when neither. Reads it as read_token_file.
std::optional<std::string> job_secret(const std::optional<std::string>& conf_value);

}  // namespace ddp::rdzv::auth
