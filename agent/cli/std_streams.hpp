#pragma once
// torchrun's --redirects / --tee values ("3" or "0:1,1:2") as per-local-rank bit masks, and the
// --local_ranks_filter list. Pure parsing; no I/O.

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "agent/core/worker_spec.hpp"  // kStdNone..kStdBoth

namespace ddp::agent {

// Which streams of which local ranks a flag applies to. `all` covers every rank not in
// `per_rank` ("3" sets all=3; "0:1,1:2" sets per_rank and leaves all=0, as torchrun).
struct StdStreams {
  int all = kStdNone;
  std::map<int, int> per_rank;

  // Returns the mask (kStdNone..kStdBoth) for `local_rank`.
  int mask_for(int local_rank) const;
  bool operator==(const StdStreams&) const = default;
};

// Parses "N" (N in 0..3) or "i:N,j:N,..." (single-digit local ranks, as torchrun). Throws
// ConfigError naming `flag` on anything else.
StdStreams parse_std_streams(std::string_view value, std::string_view flag);

// Parses --local_ranks_filter: "" means every rank (nullopt), else a comma list of non-negative
// integers. Throws ConfigError naming `flag`.
std::optional<std::set<int>> parse_local_ranks_filter(std::string_view value,
                                                      std::string_view flag);

// Renders a StdStreams back into torchrun's syntax ("3", "0:1,1:2"), for --dry_run.
std::string to_string(const StdStreams& streams);

}  // namespace ddp::agent
