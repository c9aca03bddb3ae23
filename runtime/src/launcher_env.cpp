#include "runtime/src/launcher_env.hpp"

#include <fmt/format.h>

#include <optional>
#include <cstdlib>

#include "common/parse_number.hpp"
#include "ddp/error.hpp"
#include "ddp/launch_env.hpp"

namespace ddp {
namespace runtime {
namespace {

constexpr int kMaxRanks = 1 << 20;

int parse_int_in_range(const char* name, const std::string& text, int min, int max) {
  const std::optional<int> parsed = parse_number<int>(text);
  if (!parsed) {
    throw ConfigError(fmt::format("environment variable {}='{}' is not an integer", name, text));
  }
  const int value = *parsed;
  if (value < min || value > max) {
    throw ConfigError(
        fmt::format("environment variable {}={} is outside [{}, {}]", name, value, min, max));
  }
  return value;
}

}  // namespace

std::string required_env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') {
    throw ConfigError(fmt::format(
        "environment variable {} is not set (is this process running under ddprun or torchrun?)",
        name));
  }
  return value;
}

int required_env_int(const char* name, int min, int max) {
  return parse_int_in_range(name, required_env(name), min, max);
}

int env_int_or(const char* name, int fallback, int min, int max) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  return parse_int_in_range(name, value, min, max);
}

}  // namespace runtime

LaunchEnv read_launch_env() {
  using runtime::kMaxRanks;
  LaunchEnv e;
  e.world_size = runtime::required_env_int("WORLD_SIZE", 1, kMaxRanks);
  e.rank = runtime::required_env_int("RANK", 0, kMaxRanks - 1);
  if (e.rank >= e.world_size) {
    throw ConfigError(fmt::format("environment variable RANK={} is not below WORLD_SIZE={}",
                                  e.rank, e.world_size));
  }
  e.local_world_size = runtime::required_env_int("LOCAL_WORLD_SIZE", 1, kMaxRanks);
  e.local_rank = runtime::required_env_int("LOCAL_RANK", 0, kMaxRanks - 1);
  if (e.local_rank >= e.local_world_size) {
    throw ConfigError(
        fmt::format("environment variable LOCAL_RANK={} is not below LOCAL_WORLD_SIZE={}",
                    e.local_rank, e.local_world_size));
  }
  e.master_addr = runtime::required_env("MASTER_ADDR");
  e.master_port = runtime::required_env_int("MASTER_PORT", 1, 65535);
  e.restart_count = runtime::env_int_or("TORCHELASTIC_RESTART_COUNT", 0, 0, 1 << 30);
  return e;
}

}  // namespace ddp
