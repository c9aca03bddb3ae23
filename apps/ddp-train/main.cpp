// ddp-train: argv -> TrainOptions -> ddp::init (under a launcher; through ddprun's hand-over
// channel under --recovery=inprocess) -> Trainer::run -> exit code.

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "apps/ddp-train/fail_signal.hpp"
#include "apps/ddp-train/recovery_session.hpp"
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
    if (options->fail_on_sigusr1) ddp::train::arm_fail_on_sigusr1();  // before the slow start-up
    ddp::InitOptions init;
    init.backend = options->backend;
    const auto grace = std::chrono::milliseconds(static_cast<long>(options->reform_grace * 1000));
    const auto session = ddp::train::RecoverySession::from_env(init, grace);
    std::shared_ptr<ddp::ProcessGroup> group;
    int local_rank = 0;
    if (session || std::getenv("RANK") != nullptr) {
      ddp::Context context = session ? session->join_next() : ddp::init(init);
      group = context.group;
      local_rank = context.local_rank;
    }
    // Moved: the trainer drops the group at a re-form, which closes its sockets for the peers.
    ddp::train::Trainer trainer(*options, std::move(group), local_rank, session.get());
    return trainer.run();
  } catch (const ddp::ConfigError& e) {
    std::fprintf(stderr, "ddp-train: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp-train: error: %s\n", e.what());
    return 1;
  }
}
