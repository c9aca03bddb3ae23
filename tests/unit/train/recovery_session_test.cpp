// RecoverySession's side of the NCCL abort, against a scripted agent (scripted_reform_agent.hpp)
// and a group that records aborts: a smaller round aborts the watched group on arrival; an
// overdue place aborts it, and when the next grace passes too the worker gives its process up
// (exit 75, in a forked child). The abort of a real NCCL communicator needs two GPUs:
// scripts/gpu/inprocess_nccl_train.sh.

#include "apps/ddp-train/recovery_session.hpp"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <string>

#include "ddp/reform_client.hpp"
#include "tests/unit/runtime/scripted_reform_agent.hpp"
#include "tests/unit/train/stub_group.hpp"

namespace {

using namespace std::chrono_literals;

class AbortRecordingGroup final : public ddp::test::StubGroup {
 public:
  explicit AbortRecordingGroup(int size, bool abortable) : size_(size), abortable_(abortable) {}

  // The session reads the size once per place it examines: the count orders the aborts
  // against the places.
  int size() const override {
    std::lock_guard lock(mutex_);
    ++examined_;
    return size_;
  }
  std::string backend() const override { return abortable_ ? "nccl" : "gloo"; }

  bool abort() override {
    std::lock_guard lock(mutex_);
    ++abort_calls_;
    examined_at_abort_ = examined_;
    aborted_ = abortable_;
    changed_.notify_all();
    return abortable_;
  }
  bool is_aborted() const override {
    std::lock_guard lock(mutex_);
    return aborted_;
  }
  // Waits up to 10 s for `calls` abort calls; returns how many there were.
  int wait_for_aborts(int calls) {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, 10s, [&] { return abort_calls_ >= calls; });
    return abort_calls_;
  }
  // How many places the session had examined at the last abort.
  int examined_at_abort() const {
    std::lock_guard lock(mutex_);
    return examined_at_abort_;
  }

 private:
  int size_;
  bool abortable_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  int abort_calls_ = 0;
  bool aborted_ = false;
  mutable int examined_ = 0;
  int examined_at_abort_ = 0;
};

// A session on `agent`'s channel, its hello read.
std::unique_ptr<ddp::train::RecoverySession> session_on(ddp::test::ScriptedAgent& agent,
                                                        std::chrono::milliseconds grace) {
  ::setenv("DDPRUN_REFORM_SOCKET", agent.address().c_str(), 1);
  ::setenv("DDPRUN_REFORM_LOCAL_RANK", "0", 1);
  ::unsetenv("DDPRUN_REFORM_STATE_DIR");
  auto session = ddp::train::RecoverySession::from_env(ddp::InitOptions{}, grace);
  agent.accept();
  agent.read_line();
  return session;
}

}  // namespace

TEST_CASE("issue 29: a round that lost a member aborts the watched NCCL group on arrival",
          "[recovery]") {
  ddp::test::ScriptedAgent agent;
  auto session = session_on(agent, 10s);
  REQUIRE(session);
  auto group = std::make_shared<AbortRecordingGroup>(3, /*abortable=*/true);
  session->watch(group);
  agent.send_place(1, {{"WORLD_SIZE", "2"}, {"RANK", "0"}});
  CHECK(group->wait_for_aborts(1) == 1);
  CHECK(group->is_aborted());
  CHECK_THROWS_AS(session->check_new_round(), ddp::train::RoundChanged);
}

TEST_CASE(
    "issue 29: a joining node's round leaves the group to the commit; a shrink after it "
    "aborts it",
    "[recovery]") {
  ddp::test::ScriptedAgent agent;
  auto session = session_on(agent, 10s);
  auto group = std::make_shared<AbortRecordingGroup>(3, /*abortable=*/true);
  session->watch(group);
  agent.send_place(1, {{"WORLD_SIZE", "4"}});
  agent.send_place(2, {{"WORLD_SIZE", "3"}});
  agent.send_place(3, {{"WORLD_SIZE", "1"}});
  CHECK(group->wait_for_aborts(1) == 1);
  CHECK(group->examined_at_abort() == 3);  // at round 3's place, not before
  CHECK(group->is_aborted());
}

TEST_CASE("issue 29: a Gloo group (no abort) is left to fail by itself", "[recovery]") {
  ddp::test::ScriptedAgent agent;
  auto session = session_on(agent, 10s);
  auto group = std::make_shared<AbortRecordingGroup>(3, /*abortable=*/false);
  session->watch(group);
  agent.send_place(1, {{"WORLD_SIZE", "2"}});
  CHECK(group->wait_for_aborts(1) == 1);  // asked, declined
  CHECK_FALSE(group->is_aborted());
}

TEST_CASE("issue 29: an overdue place aborts the group, and the next grace gives the process up",
          "[recovery]") {
  ddp::test::ScriptedAgent agent;
  int err[2];
  REQUIRE(::pipe(err) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {  // the worker: a joining node's round, never taken by a training thread
    ::dup2(err[1], 2);
    ::close(err[0]);
    ::setenv("DDPRUN_REFORM_SOCKET", agent.address().c_str(), 1);
    ::setenv("DDPRUN_REFORM_LOCAL_RANK", "0", 1);
    ::unsetenv("DDPRUN_REFORM_STATE_DIR");
    auto session = ddp::train::RecoverySession::from_env(ddp::InitOptions{}, 100ms);
    auto group = std::make_shared<AbortRecordingGroup>(3, /*abortable=*/true);
    session->watch(group);
    group->wait_for_aborts(1);
    ::sleep(10);  // the session's give-up ends the process long before
    std::_Exit(1);
  }
  ::close(err[1]);
  agent.accept();
  agent.read_line();
  agent.send_place(1, {{"WORLD_SIZE", "4"}});
  std::string output;
  char chunk[512];
  for (ssize_t n; (n = ::read(err[0], chunk, sizeof(chunk))) > 0;) output.append(chunk, n);
  ::close(err[0]);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  INFO(output);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == ddp::kReformGiveUpExit);
  const auto aborted = output.find("aborted the nccl group of round -1");
  const auto gave_up = output.find("ending with 75");
  CHECK(aborted != std::string::npos);
  CHECK(gave_up != std::string::npos);
  CHECK(aborted < gave_up);
}
