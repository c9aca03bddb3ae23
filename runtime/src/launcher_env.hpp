#pragma once
// Reading the variables a launcher (ddprun or torchrun) gives each worker. Errors name the
// variable they are about.

#include <map>
#include <optional>
#include <string>

namespace ddp::runtime {

// The value of `name`, or ConfigError "environment variable NAME is not set (is this process
// running under ddprun or torchrun?)".
std::string required_env(const char* name);

// The integer value of `name` in [min, max]; ConfigError naming the variable and the bad value.
int required_env_int(const char* name, int min, int max);

// As required_env_int, with `fallback` when the variable is unset or empty.
int env_int_or(const char* name, int fallback, int min, int max);

}  // namespace ddp::runtime
