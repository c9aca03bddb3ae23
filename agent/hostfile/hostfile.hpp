#pragma once
// The --hostfile format (DeepSpeed's and Open MPI's): one host a line, `host [slots=N]`, `#`
// starts a comment. Parsing and --include/--exclude selection are pure; read_hostfile reads.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ddp::agent {

struct HostEntry {
  std::string host;          // as written: a name or an address (IPv6 without brackets)
  std::optional<int> slots;  // slots=N (N > 0); nullopt when the line gives none
  int line = 0;              // 1-based line in the file, for errors
};

// Parses hostfile text. `origin` names the file in errors ("--hostfile hosts.txt"). Throws
// ConfigError naming the line for: a malformed or non-positive slots=, an unknown key=value, more
// than one host on a line, a host listed twice (both lines named), or no host at all.
std::vector<HostEntry> parse_hostfile(std::string_view text, const std::string& origin);

// Reads and parses `path`. Throws ConfigError naming the file when it cannot be read.
std::vector<HostEntry> read_hostfile(const std::string& path, const std::string& origin);

// Keeps the hosts named by `include` (comma-separated; empty keeps all), then drops those named
// by `exclude`, in file order. Throws ConfigError for a name that is not in the file, or when
// nothing is left.
std::vector<HostEntry> select_hosts(const std::vector<HostEntry>& hosts, const std::string& include,
                                    const std::string& exclude);

}  // namespace ddp::agent
