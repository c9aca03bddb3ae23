// RecoverySession. The give-up runs on the reform client's thread while the training thread is
// blocked (in a collective with a peer whose link is cut, or in a join that counts a peer that
// died): it writes the last commit, then ends the process with kReformGiveUpExit. The agent sees
// the channel close, starts the worker again in the same round, and the new process resumes
// from the file (Trainer::run).

#include "apps/ddp-train/recovery_session.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

#include "common/log.hpp"
#include "common/parse_number.hpp"
#include "common/reform_protocol.hpp"
#include "ddp/error.hpp"

namespace ddp::train {

std::unique_ptr<RecoverySession> RecoverySession::from_env(const InitOptions& init,
                                                           std::chrono::milliseconds grace) {
  const char* local_rank = std::getenv(reform::kLocalRankEnv);
  const std::string dir = ReformClient::state_dir_from_env();
  std::string file;
  if (!dir.empty()) {
    file = fmt::format("{}/ddp_train_commit_{}.safetensors", dir,
                       local_rank != nullptr ? local_rank : "0");
  }
  std::unique_ptr<RecoverySession> session(new RecoverySession(init, std::move(file)));
  RecoverySession* s = session.get();
  session->client_ = ReformClient::from_env(
      grace, [s](int round) { return s->on_overdue(round); },
      [s](const ReformPlace& place) { s->on_place(place); });
  if (!session->client_) return nullptr;
  return session;
}

RecoverySession::RecoverySession(const InitOptions& init, std::string commit_file)
    : init_(init), commit_file_(std::move(commit_file)) {
  // A failed collective goes straight to the re-form: waiting for arrival marks to name the lost
  // rank costs each survivor in turn (the next one fails when this one drops its group).
  init_.failure_report_grace = std::chrono::milliseconds(0);
}

Context RecoverySession::join_next() {
  for (;;) {
    const ReformPlace place = client_->wait_newer_than(round_);
    round_ = place.round;
    try {
      return init_at(place, init_);
    } catch (const IoError& e) {
      log::get("train")->warn("joining round {} failed ({}); waiting for the next", round_,
                              e.what());
    } catch (const TimeoutError& e) {
      log::get("train")->warn("joining round {} failed ({}); waiting for the next", round_,
                              e.what());
    }
  }
}

void RecoverySession::check_new_round() {
  if (const auto place = client_->newer_than(round_)) {
    throw RoundChanged(fmt::format("round {} announced", place->round));
  }
}

void RecoverySession::reformed() { client_->reformed(round_); }

void RecoverySession::watch(std::shared_ptr<ProcessGroup> group) {
  std::lock_guard lock(watched_mutex_);
  watched_ = std::move(group);
  watched_round_ = round_;
}

std::pair<ReformFacts, std::shared_ptr<ProcessGroup>> RecoverySession::facts_of(int round,
                                                                                int world,
                                                                                bool overdue) {
  std::lock_guard lock(watched_mutex_);
  ReformFacts facts{.has_group = watched_ != nullptr,
                    .aborted = watched_ != nullptr && watched_->is_aborted(),
                    .group_round = watched_round_,
                    .group_size = watched_ != nullptr ? watched_->size() : 0,
                    .announced_round = round,
                    .announced_world = world,
                    .overdue = overdue};
  return {facts, watched_};
}

void RecoverySession::on_place(const ReformPlace& place) {
  const auto it = place.env.find("WORLD_SIZE");
  const int world = it != place.env.end() ? parse_number<int>(it->second).value_or(-1) : -1;
  const auto [facts, group] = facts_of(place.round, world, /*overdue=*/false);
  if (decide_reform_action(facts) != ReformAction::kAbortGroup) return;
  // Gloo too: a collective with a lost member fails by itself only when its connections close;
  // one with a node whose link was cut would wait out the group's timeout.
  if (group->abort()) {
    log::get("train")->info(
        "round {} has world_size={} < {}: a peer is gone; aborted the {} "
        "group of round {}",
        place.round, world, facts.group_size, group->backend(), facts.group_round);
  }
}

bool RecoverySession::on_overdue(int round) {
  const auto [facts, group] = facts_of(round, -1, /*overdue=*/true);
  if (decide_reform_action(facts) == ReformAction::kAbortGroup && group->abort()) {
    log::get("train")->info(
        "blocked past the hand-over of round {}; aborted the {} group of "
        "round {}",
        round, group->backend(), facts.group_round);
    return true;
  }
  give_up(round);
}

void RecoverySession::give_up(int round) {
  std::string saved = "no commit file";
  try {
    const TrainCommit* commit = commit_.load();
    if (commit != nullptr && !commit_file_.empty()) {
      const Checkpoint ckpt = commit->checkpoint();
      save_checkpoint(commit_file_, ckpt);  // atomic: a temporary file, then a rename
      saved = fmt::format("{} commits saved to {}", ckpt.meta("commits"), commit_file_);
    }
  } catch (const std::exception& e) {  // the process ends all the same; its peers hold the state
    saved = fmt::format("the commit could not be saved: {}", e.what());
  }
  std::fprintf(stderr,
               "ddp-train: blocked past the hand-over of round %d; ending with %d to be started "
               "again (%s)\n",
               round, kReformGiveUpExit, saved.c_str());
  std::fflush(stderr);
  std::fflush(stdout);
  std::_Exit(kReformGiveUpExit);
}

}  // namespace ddp::train
