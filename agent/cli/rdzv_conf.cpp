// --rdzv_conf parsing. Known keys are type-checked here, once, so the agent's accessors cannot
// fail halfway through a rendezvous; unknown keys are kept (backends may read them) but unused.

#include "agent/cli/rdzv_conf.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "agent/core/text.hpp"
#include "common/parse_number.hpp"
#include "ddp/error.hpp"

namespace ddp::agent {
namespace {

struct IntKey {
  const char* name;
  long long default_value;
  long long minimum;  // torchrun rejects non-positive store timeouts; zero grace periods are ok
};

// Keys torchrun reads as integers (seconds, or a count), their defaults and smallest values.
constexpr IntKey kIntKeys[] = {
    {"timeout", 900, 1},
    {"join_timeout", 600, 1},
    {"last_call_timeout", 30, 0},
    {"close_timeout", 30, 0},
    {"heartbeat_timeout", 5, 1},
    {"keep_alive_interval", 5, 1},
    {"keep_alive_max_attempt", 3, 1},
    {"read_timeout", 60, 1},
    {"lease_ttl", 10, 1},
    {"connection_grace_ms", 300, 0},  // ddprun's own: a closed store connection's grace
    {"reform_timeout", 30, 1},        // ddprun's own: --recovery=inprocess, per hand-over
};


std::string strip_copy(std::string_view text) { return std::string(detail::strip(text)); }

const IntKey& int_key(std::string_view name) {
  for (const IntKey& key : kIntKeys) {
    if (name == key.name) return key;
  }
  throw InternalError(fmt::format("rdzv_conf: {} is not an integer key", name));
}

}  // namespace

std::optional<bool> parse_bool_word(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* word : {"1", "true", "t", "yes", "y"}) {
    if (lower == word) return true;
  }
  for (const char* word : {"0", "false", "f", "no", "n"}) {
    if (lower == word) return false;
  }
  return std::nullopt;
}

RdzvConf RdzvConf::parse(std::string_view text, std::string_view flag) {
  RdzvConf conf;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = strip_copy(text.substr(start, comma - start));
    start = comma + 1;
    if (item.empty()) continue;  // "a=1," and "" are fine, as in torchrun
    const std::size_t eq = item.find('=');
    const std::string key = strip_copy(item.substr(0, eq));
    const std::string value = eq == std::string::npos ? "" : strip_copy(item.substr(eq + 1));
    if (eq == std::string::npos || key.empty() || value.empty()) {
      throw ConfigError(
          fmt::format("{}: expected key=value pairs separated by ',', got '{}'", flag, item));
    }
    conf.values_[key] = value;
  }
  for (const IntKey& key : kIntKeys) {
    const auto it = conf.values_.find(key.name);
    if (it == conf.values_.end()) continue;
    const auto number = parse_number<long long>(it->second);
    if (!number || *number < key.minimum) {
      throw ConfigError(fmt::format("{}: {} must be an integer >= {}, got '{}'", flag, key.name,
                                    key.minimum, it->second));
    }
  }
  if (const auto host = conf.get("is_host"); host && !parse_bool_word(*host)) {
    throw ConfigError(fmt::format(
        "{}: is_host must be a boolean (1,true,t,yes,y / 0,false,f,no,n), got '{}'", flag, *host));
  }
  if (const auto protocol = conf.get("protocol"); protocol && *protocol != "http" &&
                                                  *protocol != "https") {
    throw ConfigError(fmt::format("{}: protocol must be http or https, got '{}'", flag, *protocol));
  }
  if (const auto allow = conf.get("worker_store_allow");
      allow && *allow != "members" && *allow != "any") {
    throw ConfigError(
        fmt::format("{}: worker_store_allow must be members or any, got '{}'", flag, *allow));
  }
  // torchrun always passes timeout=900 to its backends when the user did not.
  if (conf.values_.emplace("timeout", "900").second) conf.injected_ = "timeout";
  return conf;
}

std::optional<std::string> RdzvConf::get(const std::string& key) const {
  const auto it = values_.find(key);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

namespace {
long long int_value(const std::map<std::string, std::string>& values, std::string_view name) {
  const IntKey& key = int_key(name);
  const auto it = values.find(key.name);
  if (it == values.end()) return key.default_value;
  // Validated by parse(); set() bypasses validation, so fall back rather than fail.
  return parse_number<long long>(it->second).value_or(key.default_value);
}
}  // namespace

std::chrono::seconds RdzvConf::timeout() const {
  return std::chrono::seconds(int_value(values_, "timeout"));
}
std::chrono::seconds RdzvConf::join_timeout() const {
  return std::chrono::seconds(int_value(values_, "join_timeout"));
}
std::chrono::seconds RdzvConf::last_call_timeout() const {
  return std::chrono::seconds(int_value(values_, "last_call_timeout"));
}
std::chrono::seconds RdzvConf::close_timeout() const {
  return std::chrono::seconds(int_value(values_, "close_timeout"));
}
std::chrono::seconds RdzvConf::heartbeat_timeout() const {
  return std::chrono::seconds(int_value(values_, "heartbeat_timeout"));
}
std::chrono::seconds RdzvConf::keep_alive_interval() const {
  return std::chrono::seconds(int_value(values_, "keep_alive_interval"));
}
int RdzvConf::keep_alive_max_attempt() const {
  return static_cast<int>(int_value(values_, "keep_alive_max_attempt"));
}
std::chrono::seconds RdzvConf::reform_timeout() const {
  return std::chrono::seconds(int_value(values_, "reform_timeout"));
}
std::chrono::milliseconds RdzvConf::connection_grace() const {
  return std::chrono::milliseconds(int_value(values_, "connection_grace_ms"));
}
std::chrono::seconds RdzvConf::read_timeout() const {
  return std::chrono::seconds(int_value(values_, "read_timeout"));
}

std::chrono::seconds RdzvConf::lease_ttl() const {
  return std::chrono::seconds(int_value(values_, "lease_ttl"));
}

std::optional<bool> RdzvConf::is_host() const {
  const auto value = get("is_host");
  return value ? parse_bool_word(*value) : std::nullopt;
}

std::string RdzvConf::to_string() const {
  std::string text;
  for (const auto& [key, value] : values_) {
    if (!text.empty()) text += ',';
    text += key + "=" + value;
  }
  return text;
}

}  // namespace ddp::agent
