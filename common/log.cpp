// Logger registry: one stderr sink shared by all named loggers so lines never interleave mid-line.

#include "common/log.hpp"

#include <spdlog/cfg/env.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>

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

// Levels of named loggers from SPDLOG_LEVEL ("coll=debug,warn"), for loggers created later.
std::map<std::string, spdlog::level::level_enum>& named_levels() {
  static std::map<std::string, spdlog::level::level_enum> levels;
  return levels;
}

spdlog::level::level_enum level_for(const std::string& name) {
  const auto it = named_levels().find(name);
  return it != named_levels().end() ? it->second : default_level();
}

}  // namespace

std::shared_ptr<spdlog::logger> get(const std::string& name) {
  std::lock_guard lock(registry_mutex());
  if (auto existing = spdlog::get(name)) return existing;
  auto logger = std::make_shared<spdlog::logger>(name, shared_sink());
  logger->set_pattern(kPattern);
  logger->set_level(level_for(name));
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
  const char* text = std::getenv("SPDLOG_LEVEL");
  std::istringstream items(text != nullptr ? text : "");
  for (std::string item; std::getline(items, item, ',');) {
    const auto eq = item.find('=');
    if (eq == std::string::npos) continue;  // the global level, read above
    named_levels()[item.substr(0, eq)] = spdlog::level::from_str(item.substr(eq + 1));
  }
}

}  // namespace ddp::log
