// ddp-train: argv -> TrainOptions -> ddp::init (under a launcher) -> Trainer::run -> exit code.

#include <cstdio>
#include <cstdlib>

#include "apps/ddp-train/train_options.hpp"
#include "apps/ddp-train/trainer.hpp"
#include "common/log.hpp"
#include "ddp/error.hpp"
#include "ddp/init.hpp"

int main(int argc, char** argv) {
  ddp::log::load_env_levels();
  try {
    const auto options = ddp::train::parse_train_options(argc, argv);
    if (!options) return 0;
    std::shared_ptr<ddp::ProcessGroup> group;
    int local_rank = 0;
    if (std::getenv("RANK") != nullptr) {
      ddp::InitOptions init;
      init.backend = options->backend;
      ddp::Context context = ddp::init(init);
      group = context.group;
      local_rank = context.local_rank;
    }
    ddp::train::Trainer trainer(*options, group, local_rank);
    return trainer.run();
  } catch (const ddp::ConfigError& e) {
    std::fprintf(stderr, "ddp-train: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp-train: error: %s\n", e.what());
    return 1;
  }
}
