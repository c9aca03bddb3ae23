#include "launcher_env.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>

#include "ddp/error.hpp"

namespace ddp::runtime {
namespace {

int parse_int_in_range(const char* name, const std::string& text, int min, int max) {
  int value = 0;
  const auto* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc{} || ptr != end) {
    throw ConfigError(fmt::format("environment variable {}='{}' is not an integer", name, text));
  }
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

}  // namespace ddp::runtime
