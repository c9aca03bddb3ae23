// ddp-train's command line: defaults, optimizer-dependent defaults, errors naming the flag.

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "apps/ddp-train/train_options.hpp"
#include "ddp/error.hpp"

namespace {

std::optional<ddp::train::TrainOptions> parse(std::vector<std::string> args) {
  args.insert(args.begin(), "ddp-train");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return ddp::train::parse_train_options(static_cast<int>(argv.size()), argv.data());
}

std::string error_of(std::vector<std::string> args) {
  try {
    parse(std::move(args));
  } catch (const ddp::ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("defaults are the reference run: 784-1024-1024-10, sgd, batch 64", "[options]") {
  const auto o = parse({});
  REQUIRE(o);
  CHECK(o->hidden == std::vector<int>{1024, 1024});
  CHECK(o->optimizer.name == "sgd");
  CHECK(o->optimizer.lr == Approx(0.05));
  CHECK(o->batch_size == 64);
  CHECK(o->bucket_cap_mb == 25.0);
  CHECK(o->data_dir == "/usr/share/datasets/fashion-mnist");
}

TEST_CASE("flags take values with a space or '='", "[options]") {
  const auto o = parse({"--epochs", "3", "--batch_size=16", "--hidden", "128,64", "--grad_accum",
                        "2", "--checkpoint", "/tmp/x.safetensors", "--scale_lr"});
  REQUIRE(o);
  CHECK(o->epochs == 3);
  CHECK(o->batch_size == 16);
  CHECK(o->hidden == std::vector<int>{128, 64});
  CHECK(o->grad_accum == 2);
  CHECK(o->checkpoint == "/tmp/x.safetensors");
  CHECK(o->scale_lr);
}

TEST_CASE("adamw gets its own lr and weight decay unless given", "[options]") {
  auto o = parse({"--optimizer", "adamw"});
  CHECK(o->optimizer.lr == Approx(0.001));
  CHECK(o->optimizer.weight_decay == Approx(0.01));
  o = parse({"--optimizer", "adamw", "--lr", "0.01", "--weight_decay", "0"});
  CHECK(o->optimizer.lr == Approx(0.01));
  CHECK(o->optimizer.weight_decay == 0.0f);
}

TEST_CASE("the supervisor flags: train log, parameter checks, stop file, SIGUSR1", "[options]") {
  auto o = parse({});
  CHECK(o->train_log.empty());
  CHECK(o->params_crc_every == 0);
  CHECK(o->stop_file.empty());
  CHECK_FALSE(o->fail_on_sigusr1);
  o = parse({"--train_log", "/tmp/log.jsonl", "--params_crc_every", "5", "--stop_file",
             "/tmp/stop", "--fail_on_sigusr1"});
  CHECK(o->train_log == "/tmp/log.jsonl");
  CHECK(o->params_crc_every == 5);
  CHECK(o->stop_file == "/tmp/stop");
  CHECK(o->fail_on_sigusr1);
  CHECK_THAT(error_of({"--params_crc_every", "-1"}), Catch::Contains("--params_crc_every"));
}

TEST_CASE("bad values are reported with the flag's name", "[options]") {
  CHECK_THAT(error_of({"--batch_size", "0"}), Catch::Contains("--batch_size"));
  CHECK_THAT(error_of({"--optimizer", "lion"}), Catch::Contains("--optimizer"));
  CHECK_THAT(error_of({"--epochs", "x"}), Catch::Contains("--epochs"));
  CHECK_THAT(error_of({"--hidden", "64,0"}), Catch::Contains("--hidden: width 0"));
  CHECK_THAT(error_of({"--fail_at_step", "3"}),
             Catch::Contains("--fail_at_step needs --checkpoint"));
  CHECK_THAT(error_of({"--no_such_flag"}), Catch::Contains("--no_such_flag"));
}
