// The training loop. Every rank runs the same sequence of collectives (parameter broadcast, one
// all-reduce per gradient bucket per optimizer step, metric all-reduces every --log_every steps
// and per epoch, a barrier after each checkpoint), so ranks stay in lockstep without extra
// coordination.

#include "apps/ddp-train/trainer.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include <zlib.h>

#include "apps/ddp-train/fail_signal.hpp"
#include "common/check.hpp"
#include "common/log.hpp"
#include "ddp/sampler.hpp"

namespace ddp::train {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kClasses = 10;
constexpr int kEvalBatch = 1000;

std::vector<int> model_widths(int features, const std::vector<int>& hidden) {
  std::vector<int> widths{features};
  widths.insert(widths.end(), hidden.begin(), hidden.end());
  widths.push_back(kClasses);
  return widths;
}


}  // namespace

void print_line(const std::string& line) {
  std::fputs(line.c_str(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

Trainer::Trainer(const TrainOptions& options, std::shared_ptr<ProcessGroup> group, int local_rank,
                 RecoverySession* session)
    : options_(options),
      train_(load_fashion_mnist(options.data_dir, true)),
      test_(load_fashion_mnist(options.data_dir, false)),
      model_(model_widths(train_.features, options.hidden)),
      session_(session),
      train_log_(options.train_log) {
  model_.init(options_.seed);
  if (options_.scale_lr && group) options_.optimizer.lr *= static_cast<float>(group->size());
  optimizer_ = make_optimizer(options_.optimizer, model_.parameters());
  engine_ = make_engine({options_.device, group ? group->backend() : "", local_rank}, model_,
                        *optimizer_, options_.optimizer);
  engine_->attach(train_, test_);
  attach(std::move(group));
  pos_world_ = world_;
}

void Trainer::attach(std::shared_ptr<ProcessGroup> group) {
  reducer_.reset();  // before the group it holds
  group_ = std::move(group);
  rank_ = group_ ? group_->rank() : 0;
  world_ = group_ ? group_->size() : 1;
  train_log_.set_rank(rank_);
  if (group_) {
    ReducerOptions ro;
    ro.bucket_cap_bytes = static_cast<std::size_t>(options_.bucket_cap_mb * 1024 * 1024);
    reducer_ = std::make_unique<Reducer>(group_, engine_->gradient_slots(), ro);
  }
  rows_per_epoch_ = (train_.size + world_ - 1) / world_;  // the sampler pads to equal shares
  micro_per_epoch_ = (rows_per_epoch_ + options_.batch_size - 1) / options_.batch_size;
  steps_per_epoch_ = (micro_per_epoch_ + options_.grad_accum - 1) / options_.grad_accum;
}

void Trainer::adopt_world() {
  pos_.micro_in_epoch = reshard_micro(pos_.micro_in_epoch, pos_world_, world_);
  if (pos_.micro_in_epoch >= micro_per_epoch_) {
    pos_.epoch += 1;
    pos_.micro_in_epoch = 0;
  }
  pos_world_ = world_;
}

bool Trainer::is_done() const {
  return stop_requested_ || (options_.max_steps > 0 && pos_.step >= options_.max_steps);
}

int Trainer::run() {
  auto log = ddp::log::get("train");
  if (rank_ == 0 && !options_.checkpoint.empty()) {  // partial files of a run killed mid-write
    if (const int stale = remove_stale_checkpoint_temporaries(options_.checkpoint); stale > 0) {
      log->info("removed {} stale temporary checkpoint file(s) beside {}", stale,
                options_.checkpoint);
    }
  }
  // Rank 0 reads the checkpoint and broadcasts what it restored (weights, optimizer state,
  // position), so the ranks agree even when only rank 0's node can see the file.
  if (rank_ == 0 && !options_.checkpoint.empty() && std::filesystem::exists(options_.checkpoint)) {
    const PositionAtWorld at =
        restore_checkpoint(options_.checkpoint, model_, *optimizer_, options_.optimizer.name);
    pos_ = at.pos;
    pos_world_ = at.world_size;
    log->info("resumed from {} epoch={} step={} (saved at world size {})", options_.checkpoint,
              pos_.epoch, pos_.step, pos_world_);
    engine_->load_from_host();
    checkpoint_step_ = pos_.step;
  }
  if (session_) return run_inprocess();
  if (group_) {
    std::vector<std::shared_ptr<Work>> works;
    for (const Tensor& t : engine_->state_tensors()) works.push_back(group_->broadcast(t, 0));
    for (auto& w : works) w->wait();
    std::int64_t position[4] = {pos_.epoch, pos_.step, pos_.micro_in_epoch, pos_world_};
    engine_->exchange({position, 4, DType::kInt64},
                      [this](Tensor t) { return group_->broadcast(t, 0); });
    pos_ = TrainPosition{position[0], position[1], position[2]};
    pos_world_ = static_cast<int>(position[3]);
  }
  adopt_world();
  train_log_.start({pos_, world_, checkpoint_step_});
  train_to_end();
  return 0;
}

void Trainer::train_to_end() {
  if (rank_ == 0) {
    ddp::log::get("train")->info(
        "training device={} world_size={} batch_size={} grad_accum={} steps_per_epoch={} "
        "buckets={}",
        engine_->device(), world_, options_.batch_size, options_.grad_accum, steps_per_epoch_,
        reducer_ ? reducer_->bucket_slots().size() : 0);
  }
  Tally test;
  bool evaluated = false;
  while (pos_.epoch < options_.epochs && !is_done()) {
    const std::int64_t epoch = pos_.epoch;
    train_epoch(epoch);
    if (pos_.epoch == epoch) break;  // stopped by --max_steps inside the epoch
    test = evaluate();
    evaluated = true;
    if (rank_ == 0) {
      print_line(fmt::format("epoch={}/{} done test_loss={:.4f} test_accuracy={:.4f}", epoch + 1,
                             options_.epochs, test.loss_sum / test.count,
                             test.correct / test.count));
    }
  }
  if (!evaluated || (pos_.micro_in_epoch != 0)) test = evaluate();
  if (!options_.checkpoint.empty()) save(pos_);
  if (rank_ == 0) {
    const double sps = samples_per_second();
    print_line(fmt::format(
        "summary epochs={} steps={} device={} world_size={} batch_size={} test_loss={:.4f} "
        "test_accuracy={:.4f} samples_per_s={:.1f} train_s={:.2f}",
        pos_.epoch, pos_.step, engine_->device(), world_, options_.batch_size,
        test.loss_sum / test.count, test.correct / test.count, sps, train_seconds_));
  }
  train_log_.end(pos_, world_, test.correct / test.count, stop_requested_);
}

void Trainer::train_epoch(std::int64_t epoch) {
  SamplerOptions so;
  so.dataset_size = train_.size;
  so.num_replicas = world_;
  so.rank = rank_;
  so.seed = options_.seed;
  DistributedSampler sampler(so);
  sampler.set_epoch(epoch);
  const std::vector<std::int64_t> order = sampler.indices();
  DDP_CHECK(static_cast<std::int64_t>(order.size()) == rows_per_epoch_,
            "sampler gave {} rows, expected {}", order.size(), rows_per_epoch_);
  engine_->set_train_order(order);
  const std::int64_t planned =
      options_.max_steps > 0 ? std::min(options_.max_steps, options_.epochs * steps_per_epoch_)
                             : options_.epochs * steps_per_epoch_;
  Tally window;
  std::int64_t window_steps = 0;
  while (pos_.micro_in_epoch < micro_per_epoch_ && !is_done()) {
    maybe_fail();
    maybe_hang();
    const auto start = Clock::now();
    const std::int64_t samples = train_step();
    window.count += static_cast<double>(samples);
    ++window_steps;
    const bool epoch_end = pos_.micro_in_epoch >= micro_per_epoch_;
    if (epoch_end) {
      pos_.epoch = epoch + 1;
      pos_.micro_in_epoch = 0;
    }
    const bool window_end = window_steps == options_.log_every || epoch_end || is_done();
    // Reading the results waits for the device, so the time measured includes its work. The
    // first step also waits: it pays the one-time costs that the figures leave out.
    if (window_end || first_step_samples_ == 0) {
      const BatchResult r = engine_->take_results();
      window.loss_sum += r.loss_sum;
      window.correct += static_cast<double>(r.correct);
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    train_seconds_ += seconds;
    samples_trained_ += samples * world_;
    if (first_step_samples_ == 0) {
      first_step_seconds_ = seconds;
      first_step_samples_ = samples * world_;
    }
    train_log_.step(pos_, world_);
    commit_step();
    if (!options_.checkpoint.empty() && options_.checkpoint_every > 0 &&
        pos_.step % options_.checkpoint_every == 0) {
      save(pos_);
    }
    check_params();
    if (window_end) {
      if (!options_.stop_file.empty() && std::filesystem::exists(options_.stop_file)) {
        window.stop = 1;
      }
      const Tally t = all_reduce(window);
      stop_requested_ = stop_requested_ || t.stop > 0;
      if (rank_ == 0) {
        const double sps = samples_per_second();
        const double step_s =
            train_seconds_ /
            static_cast<double>(std::max<std::int64_t>(
                1, samples_trained_ / (static_cast<std::int64_t>(world_) * options_.batch_size *
                                       options_.grad_accum)));
        const double eta = static_cast<double>(planned - pos_.step) * step_s;
        print_line(fmt::format(
            "epoch={}/{} step={}/{} loss={:.4f} accuracy={:.4f} samples_per_s={:.1f} eta_s={:.0f}",
            epoch + 1, options_.epochs, pos_.step, planned, t.loss_sum / t.count,
            t.correct / t.count, sps, std::max(0.0, eta)));
      }
      window = Tally{};
      window_steps = 0;
    }
    if (epoch_end) return;
  }
}

std::int64_t Trainer::train_step() {
  std::int64_t samples = 0;
  const auto n_micro = static_cast<int>(
      std::min<std::int64_t>(options_.grad_accum, micro_per_epoch_ - pos_.micro_in_epoch));
  const float loss_scale = 1.0f / static_cast<float>(n_micro);
  for (int k = 0; k < n_micro; ++k) {
    const std::int64_t begin = pos_.micro_in_epoch * options_.batch_size;
    const std::int64_t end = std::min(begin + options_.batch_size, rows_per_epoch_);
    const int batch = static_cast<int>(end - begin);
    engine_->forward(Split::kTrain, begin, batch);
    samples += batch;
    if (reducer_) {
      reducer_->set_require_sync(k + 1 == n_micro);
      engine_->backward(
          loss_scale, [this](std::size_t slot) { reducer_->mark_ready(slot); }, k > 0);
    } else {
      engine_->backward(loss_scale, nullptr, k > 0);
    }
    ++pos_.micro_in_epoch;
  }
  if (reducer_) reducer_->finalize();
  ++pos_.step;
  engine_->step(pos_.step);
  return samples;
}

double Trainer::samples_per_second() const {
  const std::int64_t samples = samples_trained_ - first_step_samples_;
  const double seconds = train_seconds_ - first_step_seconds_;
  if (samples > 0 && seconds > 0) return static_cast<double>(samples) / seconds;
  return train_seconds_ > 0 ? static_cast<double>(samples_trained_) / train_seconds_ : 0.0;
}

Tally Trainer::evaluate() {
  // Contiguous shards, so every test sample is counted exactly once whatever the world size.
  const std::int64_t begin = test_.size * rank_ / world_;
  const std::int64_t end = test_.size * (rank_ + 1) / world_;
  Tally local;
  for (std::int64_t i = begin; i < end; i += kEvalBatch) {
    const int batch = static_cast<int>(std::min<std::int64_t>(kEvalBatch, end - i));
    engine_->forward(Split::kTest, i, batch);
    local.count += batch;
  }
  const BatchResult r = engine_->take_results();
  local.loss_sum = r.loss_sum;
  local.correct = static_cast<double>(r.correct);
  return all_reduce(local);
}

Tally Trainer::all_reduce(const Tally& local) {
  if (!group_) return local;
  double values[4] = {local.loss_sum, local.correct, local.count, local.stop};
  engine_->exchange({values, 4, DType::kFloat64},
                    [this](Tensor t) { return group_->all_reduce(t, ReduceOp::kSum); });
  return Tally{values[0], values[1], values[2], values[3]};
}

void Trainer::save(const TrainPosition& pos) {
  if (rank_ == 0) {
    engine_->store_to_host();
    save_checkpoint(options_.checkpoint,
                    make_checkpoint(model_, *optimizer_, pos, world_, options_.batch_size,
                                    options_.grad_accum, options_.optimizer.name, options_.seed));
    train_log_.checkpoint(pos, options_.checkpoint);
  }
  if (group_) group_->barrier()->wait();
}

void Trainer::check_params() {
  if (options_.params_crc_every <= 0 || pos_.step % options_.params_crc_every != 0) return;
  engine_->store_to_host();
  const auto [low, high] = params_crc_range();
  train_log_.params(pos_, world_, low, high);
  if (low != high && rank_ == 0) {
    ddp::log::get("train")->error("step={}: the ranks' parameters differ (CRC32 {} to {})",
                                  pos_.step, low, high);
  }
}

std::pair<std::int64_t, std::int64_t> Trainer::params_crc_range() {
  const std::vector<float>& values = model_.flat_values();
  const auto crc = static_cast<std::int64_t>(
      crc32(0L, reinterpret_cast<const Bytef*>(values.data()),
            static_cast<uInt>(values.size() * sizeof(float))));
  if (!group_) return {crc, crc};
  std::int64_t low_and_negated_high[2] = {crc, -crc};  // one all-reduce gives min and max
  engine_->exchange({low_and_negated_high, 2, DType::kInt64},
                    [this](Tensor t) { return group_->all_reduce(t, ReduceOp::kMin); });
  return {low_and_negated_high[0], -low_and_negated_high[1]};
}

void Trainer::maybe_fail() {
  if (is_fail_requested()) {
    ddp::log::get("train")->error("failing on SIGUSR1 at step={} rank={} (exit 3)", pos_.step,
                                  rank_);
    std::fflush(stdout);
    std::_Exit(3);
  }
  if (options_.fail_at_step < 0 || pos_.step != options_.fail_at_step ||
      rank_ != options_.fail_rank) {
    return;
  }
  const std::string marker = options_.checkpoint + ".failed_once";
  if (std::filesystem::exists(marker)) return;
  std::ofstream(marker) << "ddp-train failed here once at step " << pos_.step << "\n";
  ddp::log::get("train")->error("injected failure at step={} rank={} (exit 3; marker {})",
                                pos_.step, rank_, marker);
  std::fflush(stdout);
  std::_Exit(3);
}

// A named frame of its own, so that a stack report shows where the rank hangs.
[[noreturn, gnu::noinline]] void hang_forever() {
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

// --slow_step_ms delays every step of one rank (slow, still progressing). The hang happens in
// the first attempt only, so a job restarted by ddprun's hang detector
// (--hang_timeout) then runs to its end.
void Trainer::maybe_hang() {
  if (options_.slow_step_ms > 0 && rank_ == options_.slow_rank) {
    std::this_thread::sleep_for(std::chrono::milliseconds(options_.slow_step_ms));
  }
  if (options_.hang_at_step < 0 || pos_.step != options_.hang_at_step ||
      rank_ != options_.hang_rank) {
    return;
  }
  const char* restart = std::getenv("TORCHELASTIC_RESTART_COUNT");
  if (restart != nullptr && std::string(restart) != "0") return;
  ddp::log::get("train")->warn("injected hang at step={} rank={} (sleeping forever)", pos_.step,
                               rank_);
  std::fflush(stdout);
  hang_forever();
}

}  // namespace ddp::train
