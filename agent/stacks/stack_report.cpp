// Stack merging and the report's layout. Normalization is line-based regex replacement: dumps are
// a few kilobytes, taken on demand, so clarity wins over speed.

#include "agent/stacks/stack_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <sstream>

namespace ddp::agent {
namespace {

const std::string kRule(60, '=');
const std::string kThinRule(60, '-');

std::string indent(const std::string& text) {
  std::string out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    out += line.empty() ? "\n" : "  " + line + "\n";
  }
  return out;
}

}  // namespace

std::string normalize_stack(const std::string& text) {
  static const std::regex kPidLine(R"(^PID \d+ - .*$)");
  static const std::regex kTid(R"(^TID \d+:)");
  static const std::regex kLwp(R"( ?\(LWP \d+\))");
  static const std::regex kAddress(R"( ?0x[0-9a-fA-F]+)");
  static const std::regex kBareFrame(R"(#\d+)");
  std::string out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (std::regex_match(line, kPidLine)) continue;
    line = std::regex_replace(line, kTid, "thread:");
    line = std::regex_replace(line, kLwp, "");
    line = std::regex_replace(line, kAddress, "");
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
    if (std::regex_match(line, kBareFrame)) line += "  ??";  // a frame without a symbol
    out += line + "\n";
  }
  while (out.size() >= 2 && out.ends_with("\n\n")) out.pop_back();
  return out;
}

std::string format_rank_ranges(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += j == i ? std::to_string(ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
    i = j + 1;
  }
  return out;
}

std::string format_stack_report(const std::string& title, const std::vector<std::string>& preface,
                                const std::vector<RankStack>& stacks) {
  // Group by (kind, normalized text); order the groups by their lowest rank.
  std::map<std::pair<std::string, std::string>, std::vector<const RankStack*>> groups;
  for (const auto& stack : stacks) {
    groups[{stack.kind, normalize_stack(stack.text)}].push_back(&stack);
  }
  std::vector<std::pair<int, const decltype(groups)::value_type*>> ordered;
  for (const auto& entry : groups) {
    int lowest = entry.second.front()->rank;
    for (const auto* stack : entry.second) lowest = std::min(lowest, stack->rank);
    ordered.emplace_back(lowest, &entry);
  }
  std::sort(ordered.begin(), ordered.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });

  std::string out = kRule + "\n" + title + "\n";
  for (const auto& line : preface) out += line + "\n";
  for (const auto& [lowest, entry] : ordered) {
    const auto& [key, members] = *entry;
    out += kThinRule + "\n";
    if (members.size() == 1) {
      const RankStack& only = *members.front();
      out += fmt::format("rank {} ({}, pid {}, host {}):\n", only.rank, only.kind, only.pid,
                         only.host);
    } else {
      std::vector<int> ranks;
      for (const auto* stack : members) ranks.push_back(stack->rank);
      out += fmt::format("ranks {} ({}):\n", format_rank_ranges(ranks), key.first);
    }
    out += indent(key.second);
  }
  out += kRule + "\n";
  return out;
}

}  // namespace ddp::agent
