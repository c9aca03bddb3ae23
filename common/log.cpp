// Logger registry: one stderr sink shared by all named loggers so lines never interleave mid-line.

#include "common/log.hpp"

#include <spdlog/cfg/env.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <mutex>

#include "ddp/error.hpp"

namespace ddp::log {
namespace {

constexpr const char* kPattern = "[ddprun] [%l] [%n] %v";

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

spdlog::sink_ptr shared_sink() {
  // stderr_sink_mt takes a lock per line: lines from a helper thread and the loop stay whole.
  static spdlog::sink_ptr sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  return sink;
}

spdlog::level::level_enum& default_level() {
  static spdlog::level::level_enum level = spdlog::level::info;
  return level;
}

}  // namespace

std::shared_ptr<spdlog::logger> get(const std::string& name) {
  std::lock_guard lock(registry_mutex());
  if (auto existing = spdlog::get(name)) return existing;
  auto logger = std::make_shared<spdlog::logger>(name, shared_sink());
  logger->set_pattern(kPattern);
  logger->set_level(default_level());
  logger->flush_on(spdlog::level::warn);
  spdlog::register_logger(logger);
  return logger;
}

void set_level(const std::string& level) {
  auto parsed = spdlog::level::from_str(level);
  if (parsed == spdlog::level::off && level != "off") {
    throw ConfigError("--log_level: unknown level '" + level +
                      "' (use trace, debug, info, warn, error, critical or off)");
  }
  std::lock_guard lock(registry_mutex());
  default_level() = parsed;
  spdlog::set_level(parsed);
}

void load_env_levels() {
  spdlog::cfg::load_env_levels();
  std::lock_guard lock(registry_mutex());
  default_level() = spdlog::get_level();
}

}  // namespace ddp::log
