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
  session->client_ =
      ReformClient::from_env(grace, [s = session.get()](int round) { s->give_up(round); });
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
