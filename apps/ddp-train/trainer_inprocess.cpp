// The Trainer's in-process recovery (ddprun --recovery=inprocess). Every rank commits after a
// step; a re-form happens when a collective fails because a peer is gone (Gloo's closed
// connection; NCCL's error) or when a commit finds that the agent announced a new round (a node
// joining is taken in at a step boundary). A collective blocked on a peer that is gone without
// closing its connections (NCCL; Gloo with a cut link) fails because the reform client's thread
// aborts the group (recovery_session.hpp). Ranks are in lockstep, so the survivors hold the same commit: a rank that leaves at commit N makes its
// peers' next collective fail, and they restore commit N too.

#include <fmt/format.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <unistd.h>

#include "apps/ddp-train/trainer.hpp"
#include "common/log.hpp"
#include "ddp/error.hpp"
#include "ddp/state_sync.hpp"

namespace ddp::train {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

int Trainer::run_inprocess() {
  auto log = ddp::log::get("train");
  engine_->store_to_host();
  commit_ = std::make_unique<TrainCommit>(
      model_, *optimizer_,
      make_checkpoint(model_, *optimizer_, pos_, world_, options_.batch_size, options_.grad_accum,
                      options_.optimizer.name, options_.seed));
  commit_->take({pos_, pos_world_}, 0);  // what a failure before the first step returns to
  bool resumed = resume_commit_file();
  session_->guard(commit_.get());
  session_->watch(group_);
  for (;;) {
    try {
      sync_with_peers();  // a peer may be lost here too: restore() undoes a partial sync
      if (resumed) {      // the group holds that commit, or a newer one, now
        std::filesystem::remove(session_->commit_file());
        resumed = false;
      }
      session_->reformed();
      train_to_end();
      return 0;
    } catch (const RoundChanged& e) {
      log->info("rank={} re-forming: {}", rank_, e.what());
    } catch (const IoError& e) {
      log->info("rank={} re-forming: a peer is gone ({})", rank_, e.what());
    } catch (const TimeoutError& e) {
      log->info("rank={} re-forming: {}", rank_, e.what());
    }
    const CommitPosition at = commit_->restore();
    engine_->load_from_host();
    pos_ = at.pos;
    pos_world_ = at.world_size;
    session_->watch(nullptr);
    attach(nullptr);  // the old group's sockets close: peers blocked on them fail at once
    attach(session_->join_next().group);
    session_->watch(group_);
  }
}

bool Trainer::resume_commit_file() {
  const std::string& file = session_->commit_file();
  if (file.empty() || !std::filesystem::exists(file)) return false;
  commit_->load(load_checkpoint(file));
  const CommitPosition at = commit_->restore();
  engine_->load_from_host();
  pos_ = at.pos;
  pos_world_ = at.world_size;
  ddp::log::get("train")->info("resumed {} commits (step={}) from {}", commit_->count(),
                               pos_.step, file);
  return true;
}

void Trainer::sync_with_peers() {
  const auto start = Clock::now();
  auto exchange = [this](Tensor host, const std::function<std::shared_ptr<Work>(Tensor)>& op) {
    engine_->exchange(host, op);
  };
  const SyncResult synced =
      sync_state(*group_, commit_->count(), engine_->state_tensors(), exchange);
  std::int64_t position[4] = {pos_.epoch, pos_.step, pos_.micro_in_epoch, pos_world_};
  engine_->exchange({position, 4, DType::kInt64},
                    [&](Tensor t) { return group_->broadcast(t, synced.root); });
  // The sender's position, re-sharded: its micro-batches counted at its commit's world size.
  pos_ = TrainPosition{position[0], position[1], position[2]};
  pos_world_ = static_cast<int>(position[3]);
  adopt_world();
  engine_->store_to_host();
  commit_->take({pos_, world_}, synced.commits);
  // Every rank's parameter bits, compared: the smallest and largest CRC32 over the ranks.
  const auto [low, high] = params_crc_range();
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  print_line(fmt::format(
      "reform round={} rank={} world_size={} pid={} step={} commits={} from_rank={} "
      "params_crc_min={} params_crc_max={} sync_ms={:.1f}",
      session_->round(), rank_, world_, ::getpid(), pos_.step, synced.commits, synced.root, low,
      high, ms));
  train_log_.start({pos_, world_, checkpoint_step_, session_->round(), synced.commits});
}

void Trainer::commit_step() {
  if (session_ == nullptr || pos_.step % options_.commit_every != 0) return;
  engine_->store_to_host();
  // An aborted NCCL kernel ends without an error, leaving partial sums behind: a step whose
  // group was aborted before its state reached the host is never committed (NCCL or Gloo).
  if (group_ && group_->is_aborted()) {
    throw IoError(fmt::format("the {} group of round {} was aborted before the commit of step {}",
                              group_->backend(), session_->round(), pos_.step));
  }
  commit_->take({pos_, world_});
  train_log_.commit(pos_, commit_->count());
  session_->progressed();
  session_->check_new_round();
}

}  // namespace ddp::train
