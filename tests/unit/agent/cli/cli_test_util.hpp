#pragma once
// Helpers for the CLI tests: parse an argv given as strings.

#include <map>
#include <string>
#include <vector>

#include "agent/cli/launch_config.hpp"

namespace ddp::agent::test {

using Env = std::map<std::string, std::string>;

// Parses "ddprun <args...>" with `env` as the environment.
inline LaunchConfig parse(const std::vector<std::string>& args, const Env& env = {}) {
  std::vector<const char*> argv{"ddprun"};
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  return parse_launch_config(static_cast<int>(argv.size()), argv.data(), env);
}

}  // namespace ddp::agent::test
