// ddp-train flags. Validation beyond CLI11's range checks lives here so that every error names the
// flag it is about.

#include "apps/ddp-train/train_options.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "ddp/error.hpp"

namespace ddp::train {

std::optional<TrainOptions> parse_train_options(int argc, char** argv) {
  TrainOptions o;
  bool lr_given = false;
  CLI::App app("ddp-train: data-parallel training of an MLP on Fashion-MNIST with libddp.",
               "ddp-train");
  app.add_option("--data", o.data_dir, "directory of the four Fashion-MNIST .gz IDX files");
  app.add_option("--hidden", o.hidden, "hidden layer widths")->delimiter(',')->expected(0, -1);
  app.add_option("--epochs", o.epochs, "epochs to train")->check(CLI::Range(0, 1 << 30));
  app.add_option("--max_steps", o.max_steps, "stop after this many optimizer steps (0: none)")
      ->check(CLI::Range(0, 1 << 30));
  app.add_option("--batch_size", o.batch_size, "samples per rank per micro-step")
      ->check(CLI::Range(1, 1 << 30));
  app.add_option("--grad_accum", o.grad_accum, "micro-steps per optimizer step (no_sync)")
      ->check(CLI::Range(1, 1 << 30));
  auto* lr = app.add_option("--lr", o.optimizer.lr, "learning rate (sgd 0.05, adamw 0.001)");
  app.add_option("--momentum", o.optimizer.momentum, "SGD momentum");
  app.add_option("--weight_decay", o.optimizer.weight_decay,
                 "weight decay (sgd: L2; adamw: decoupled, default 0.01)");
  app.add_option("--seed", o.seed, "seed of the model init and the sampler");
  app.add_option("--optimizer", o.optimizer.name, "sgd or adamw")
      ->check(CLI::IsMember({"sgd", "adamw"}));
  app.add_flag("--scale_lr", o.scale_lr, "multiply the learning rate by the world size");
  app.add_option("--bucket_cap_mb", o.bucket_cap_mb, "gradient bucket cap in MiB")
      ->check(CLI::Range(1e-6, 1e6));
  app.add_option("--checkpoint", o.checkpoint, "safetensors checkpoint: resumed from, written to");
  app.add_option("--checkpoint_every", o.checkpoint_every, "steps between checkpoints (0: end)")
      ->check(CLI::Range(0, 1 << 30));
  app.add_option("--fail_at_step", o.fail_at_step, "fault injection: exit 3 once at this step");
  app.add_option("--fail_rank", o.fail_rank, "fault injection: the rank that fails")
      ->check(CLI::Range(0, 1 << 30));
  app.add_option("--hang_at_step", o.hang_at_step,
                 "fault injection: --hang_rank sleeps forever at this step (first attempt only)");
  app.add_option("--hang_rank", o.hang_rank, "fault injection: the rank that hangs")
      ->check(CLI::Range(0, 1 << 30));
  app.add_option("--slow_step_ms", o.slow_step_ms,
                 "fault injection: --slow_rank sleeps this many ms before every step")
      ->check(CLI::Range(0, 1 << 30));
  app.add_option("--slow_rank", o.slow_rank, "fault injection: the rank that is slow")
      ->check(CLI::Range(0, 1 << 30));
  app.add_option("--log_every", o.log_every, "steps between progress lines")
      ->check(CLI::Range(1, 1 << 30));
  app.add_option("--train_log", o.train_log,
                 "rank 0 appends a JSON line per start, step, commit, checkpoint, parameter check "
                 "and end of the run to this file");
  app.add_option("--params_crc_every", o.params_crc_every,
                 "steps between checks that every rank holds the same parameters (0: never)")
      ->check(CLI::Range(0, 1 << 30));
  app.add_option("--stop_file", o.stop_file,
                 "end the run (evaluation, checkpoint, summary, exit 0) at the first progress "
                 "line after this file exists");
  app.add_flag("--fail_on_sigusr1", o.fail_on_sigusr1,
               "fault injection: SIGUSR1 makes this process exit 3 before its next step");
  app.add_option("--backend", o.backend, "gloo or nccl (default: libddp's choice)");
  app.add_option("--device", o.device,
                 "auto (CUDA with the nccl backend or, alone, with a visible GPU), cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  app.add_option("--commit_every", o.commit_every,
                 "ddprun --recovery=inprocess: steps between in-memory commits")
      ->check(CLI::Range(1, 1 << 30));
  app.add_option("--reform_grace", o.reform_grace,
                 "ddprun --recovery=inprocess: seconds a new round may wait for the training "
                 "thread before a blocked worker leaves its commit in a file and exits 75")
      ->check(CLI::Range(0.01, 1e6));
  bool weight_decay_given = false;
  try {
    app.parse(argc, argv);
    lr_given = lr->count() > 0;
    weight_decay_given = app.get_option("--weight_decay")->count() > 0;
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    throw ConfigError(e.what());
  }
  if (o.optimizer.name == "adamw") {
    if (!lr_given) o.optimizer.lr = 0.001f;
    if (!weight_decay_given) o.optimizer.weight_decay = 0.01f;
  }
  for (int w : o.hidden) {
    if (w <= 0) throw ConfigError(fmt::format("--hidden: width {} must be positive", w));
  }
  if (o.fail_at_step >= 0 && o.checkpoint.empty()) {
    throw ConfigError("--fail_at_step needs --checkpoint (its marker file lives beside it)");
  }
  return o;
}

}  // namespace ddp::train
