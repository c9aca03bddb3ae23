// Parsing of --redirects/--tee and --local_ranks_filter. torchrun 1.13 on Python 3.11 mis-parses
// "0" and "3" (spec §0.1); this implements the intended semantics: 0 none, 1 out, 2 err, 3 both.

#include "agent/cli/std_streams.hpp"

#include <fmt/format.h>

#include "agent/core/text.hpp"
#include "common/parse_number.hpp"
#include "ddp/error.hpp"

namespace ddp::agent {
namespace {

using detail::split_commas;
using detail::strip;

bool is_mask_digit(char c) { return c >= '0' && c <= '3'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

int StdStreams::mask_for(int local_rank) const {
  const auto it = per_rank.find(local_rank);
  return it == per_rank.end() ? all : it->second;
}

StdStreams parse_std_streams(std::string_view value, std::string_view flag) {
  const auto bad = [&] {
    return ConfigError(fmt::format(
        "{}: expected 0-3 or a list like 0:1,1:2 (local rank 0-9 : 0 none, 1 stdout, 2 stderr, "
        "3 both), got '{}'",
        flag, value));
  };
  StdStreams streams;
  if (value.size() == 1 && is_mask_digit(value[0])) {
    streams.all = value[0] - '0';
    return streams;
  }
  // torchrun's pattern: ^(\d:[0123],)*(\d:[0123])$ -- single-digit ranks, no spaces.
  for (std::string_view item : split_commas(value)) {
    if (item.size() != 3 || !is_digit(item[0]) || item[1] != ':' || !is_mask_digit(item[2])) {
      throw bad();
    }
    streams.per_rank[item[0] - '0'] = item[2] - '0';
  }
  return streams;
}

std::optional<std::set<int>> parse_local_ranks_filter(std::string_view value,
                                                      std::string_view flag) {
  if (strip(value).empty()) return std::nullopt;
  std::set<int> ranks;
  for (std::string_view item : split_commas(value)) {
    item = strip(item);
    const std::optional<int> rank = parse_number<int>(item);
    if (!rank || *rank < 0) {
      throw ConfigError(
          fmt::format("{}: expected a comma list of local ranks like 0,2, got '{}'", flag, value));
    }
    ranks.insert(*rank);
  }
  return ranks;
}

std::string to_string(const StdStreams& streams) {
  if (streams.per_rank.empty()) return std::to_string(streams.all);
  std::string text;
  for (const auto& [rank, mask] : streams.per_rank) {
    if (!text.empty()) text += ',';
    text += fmt::format("{}:{}", rank, mask);
  }
  return text;
}

}  // namespace ddp::agent
