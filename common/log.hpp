#pragma once
// Named spdlog loggers (agent, rdzv, store, worker, coll, train) writing to stderr with the pattern
// "[ddprun] [level] [name] message". Level: set_level() (from --log_level), else SPDLOG_LEVEL;
// programs choose their own default (ddprun: warn, quiet as torchrun; the others: info).

#include <spdlog/spdlog.h>

#include <memory>
#include <string>

namespace ddp::log {

// Returns the logger called `name`, creating it on first use. Thread-safe.
std::shared_ptr<spdlog::logger> get(const std::string& name);

// Sets the level of every logger, existing and future ("trace".."off"). Throws ConfigError on an
// unknown level name.
void set_level(const std::string& level);

// Applies SPDLOG_LEVEL from the environment (e.g. "debug" or "store=trace,agent=info").
void load_env_levels();

}  // namespace ddp::log
