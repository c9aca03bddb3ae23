// ddp::read_launch_env: the variables a launcher gives each worker, and the errors that name them.
#include <catch2/catch.hpp>
#include <stdlib.h>

#include <map>
#include <optional>
#include <string>

#include "ddp/error.hpp"
#include "ddp/launch_env.hpp"

namespace {

using Env = std::map<std::string, std::string>;  // "" = unset

// Sets the given variables for one test case and restores what was there before.
class ScopedEnv {
 public:
  explicit ScopedEnv(const Env& values) {
    for (const auto& [name, value] : values) {
      const char* old = std::getenv(name.c_str());
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
      apply(name, value.empty() ? std::nullopt : std::optional<std::string>(value));
    }
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : saved_) apply(name, value);
  }

 private:
  static void apply(const std::string& name, const std::optional<std::string>& value) {
    if (value) {
      setenv(name.c_str(), value->c_str(), 1);
    } else {
      unsetenv(name.c_str());
    }
  }
  std::map<std::string, std::optional<std::string>> saved_;
};

Env launcher_env() {
  return {{"RANK", "3"},         {"WORLD_SIZE", "8"},          {"LOCAL_RANK", "1"},
          {"LOCAL_WORLD_SIZE", "2"}, {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"},
          {"TORCHELASTIC_RESTART_COUNT", ""}};
}

// The launcher's variables with one of them changed ("" unsets it).
Env with(const std::string& name, std::string value) {
  Env env = launcher_env();
  env.insert_or_assign(name, std::move(value));
  return env;
}

std::string error_of(const Env& env) {
  ScopedEnv scoped(env);
  try {
    ddp::read_launch_env();
  } catch (const ddp::ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("read_launch_env reads what the launcher set", "[runtime]") {
  ScopedEnv scoped(launcher_env());
  const ddp::LaunchEnv e = ddp::read_launch_env();
  CHECK(e.rank == 3);
  CHECK(e.world_size == 8);
  CHECK(e.local_rank == 1);
  CHECK(e.local_world_size == 2);
  CHECK(e.master_addr == "10.0.0.1");
  CHECK(e.master_port == 29500);
  CHECK(e.restart_count == 0);
}

TEST_CASE("read_launch_env names the variable that is wrong", "[runtime]") {
  SECTION("missing") {
    CHECK_THAT(error_of(with("MASTER_ADDR", "")), Catch::Contains("MASTER_ADDR is not set"));
  }
  SECTION("not an integer") {
    CHECK_THAT(error_of(with("WORLD_SIZE", "eight")),
               Catch::Contains("WORLD_SIZE='eight' is not an integer"));
  }
  SECTION("rank not below the world size") {
    CHECK_THAT(error_of(with("RANK", "8")), Catch::Contains("RANK=8 is not below WORLD_SIZE=8"));
  }
  SECTION("port out of range") {
    CHECK_THAT(error_of(with("MASTER_PORT", "70000")),
               Catch::Contains("MASTER_PORT=70000 is outside [1, 65535]"));
  }
  SECTION("a restart count from an elastic launcher") {
    ScopedEnv scoped(with("TORCHELASTIC_RESTART_COUNT", "2"));
    CHECK(ddp::read_launch_env().restart_count == 2);
  }
}
