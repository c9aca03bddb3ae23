// Hostfile parsing and host selection. Whitespace separates fields; everything after '#' is a
// comment. A host may appear once only: two lines for one host would start two agents there
// with the same node's slots, which is never what the user meant.

#include "agent/hostfile/hostfile.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "agent/core/text.hpp"
#include "common/parse_number.hpp"
#include "ddp/error.hpp"

namespace ddp::agent {
namespace {

constexpr int kMaxSlots = 1 << 16;

std::vector<std::string_view> fields_of(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    std::size_t end = i;
    while (end < line.size() && !std::isspace(static_cast<unsigned char>(line[end]))) ++end;
    if (end > i) fields.push_back(line.substr(i, end - i));
    i = end;
  }
  return fields;
}

int parse_slots(std::string_view value, const std::string& where) {
  const std::optional<int> slots = parse_number<int>(value);
  if (!slots || *slots <= 0 || *slots > kMaxSlots) {
    throw ConfigError(fmt::format("{}: slots must be an integer from 1 to {}, got '{}'", where,
                                  kMaxSlots, value));
  }
  return *slots;
}

// Splits a comma list of host names; empty items are errors (a stray comma hides a typo).
std::vector<std::string> names_of(const std::string& list, const char* flag) {
  std::vector<std::string> names;
  if (list.empty()) return names;
  for (std::string_view name : detail::split_commas(list)) {
    name = detail::strip(name);
    if (name.empty()) throw ConfigError(fmt::format("{}: empty host name in '{}'", flag, list));
    names.emplace_back(name);
  }
  return names;
}

}  // namespace

std::vector<HostEntry> parse_hostfile(std::string_view text, const std::string& origin) {
  std::vector<HostEntry> hosts;
  std::map<std::string, int, std::less<>> seen;  // host -> its line
  int number = 0;
  while (!text.empty()) {
    ++number;
    const std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    line = line.substr(0, line.find('#'));
    const auto fields = fields_of(line);
    if (fields.empty()) continue;
    const std::string where = fmt::format("{} line {}", origin, number);
    HostEntry entry{std::string(fields[0]), std::nullopt, number};
    if (entry.host.find('=') != std::string::npos) {
      throw ConfigError(fmt::format("{}: expected 'host [slots=N]', got '{}'", where, line));
    }
    for (std::size_t i = 1; i < fields.size(); ++i) {
      const std::string_view field = fields[i];
      const std::size_t eq = field.find('=');
      if (eq == std::string_view::npos) {
        throw ConfigError(
            fmt::format("{}: one host per line, got '{}' after '{}'", where, field, entry.host));
      }
      const std::string_view key = field.substr(0, eq);
      // Open MPI also spells it max_slots/max-slots; ddprun starts exactly `slots` workers.
      if (key != "slots") {
        throw ConfigError(fmt::format("{}: unknown setting '{}' (only slots=N)", where, key));
      }
      entry.slots = parse_slots(field.substr(eq + 1), where);
    }
    if (const auto it = seen.find(entry.host); it != seen.end()) {
      throw ConfigError(fmt::format("{}: host {} is listed twice (lines {} and {})", origin,
                                    entry.host, it->second, number));
    }
    seen.emplace(entry.host, number);
    hosts.push_back(std::move(entry));
  }
  if (hosts.empty()) throw ConfigError(fmt::format("{}: lists no host", origin));
  return hosts;
}

std::vector<HostEntry> read_hostfile(const std::string& path, const std::string& origin) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw ConfigError(fmt::format("{}: cannot read {}: {}", origin, path, std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw ConfigError(fmt::format("{}: cannot read {}", origin, path));
  return parse_hostfile(text.str(), origin);
}

std::vector<HostEntry> select_hosts(const std::vector<HostEntry>& hosts, const std::string& include,
                                    const std::string& exclude) {
  const auto included = names_of(include, "--include");
  const auto excluded = names_of(exclude, "--exclude");
  std::set<std::string, std::less<>> in_file;
  for (const HostEntry& entry : hosts) in_file.insert(entry.host);
  for (const auto* list : {&included, &excluded}) {
    for (const std::string& name : *list) {
      if (!in_file.contains(name)) {
        throw ConfigError(fmt::format("{}: host {} is not in the hostfile",
                                      list == &included ? "--include" : "--exclude", name));
      }
    }
  }
  const std::set<std::string, std::less<>> keep(included.begin(), included.end());
  const std::set<std::string, std::less<>> drop(excluded.begin(), excluded.end());
  std::vector<HostEntry> selected;
  for (const HostEntry& entry : hosts) {
    if ((keep.empty() || keep.contains(entry.host)) && !drop.contains(entry.host)) {
      selected.push_back(entry);
    }
  }
  if (selected.empty()) throw ConfigError("--include/--exclude: no host of the hostfile is left");
  return selected;
}

}  // namespace ddp::agent
