// RecoverySession's side of the group abort, against a scripted agent (scripted_reform_agent.hpp)
// and a group that records aborts: a smaller round aborts the watched group on arrival; an
// overdue place aborts it, and when the next grace passes too the worker gives its process up
// (exit 75, in a forked child). The same with a real Gloo group blocked on a peer that is
// connected but never joins (a cut link): the abort frees it, and the process stays. The abort
// of a real NCCL communicator needs two GPUs: scripts/gpu/inprocess_nccl_train.sh.

#include "apps/ddp-train/recovery_session.hpp"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "collectives/gloo/gloo_process_group.hpp"
#include "ddp/error.hpp"
#include "ddp/reform_client.hpp"
#include "rendezvous/store_client/blocking_store.hpp"
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

// Reads the forked `child`'s stderr (the read end `fd`, closed here) until it exits; its wait
// status goes to `status`.
std::string output_until_exit(int fd, pid_t child, int& status) {
  std::string output;
  char chunk[512];
  for (ssize_t n; (n = ::read(fd, chunk, sizeof(chunk))) > 0;) output.append(chunk, n);
  ::close(fd);
  REQUIRE(::waitpid(child, &status, 0) == child);
  return output;
}

// In a forked child: its stderr into the pipe `err`, and a session on `agent`'s channel (the
// parent accepts it).
std::unique_ptr<ddp::train::RecoverySession> forked_session_on(ddp::test::ScriptedAgent& agent,
                                                               const int err[2],
                                                               std::chrono::milliseconds grace) {
  ::dup2(err[1], 2);
  ::close(err[0]);
  ::setenv("DDPRUN_REFORM_SOCKET", agent.address().c_str(), 1);
  ::setenv("DDPRUN_REFORM_LOCAL_RANK", "0", 1);
  ::unsetenv("DDPRUN_REFORM_STATE_DIR");
  return ddp::train::RecoverySession::from_env(ddp::InitOptions{}, grace);
}

// What a forked worker wrote to its stderr, and its wait status.
struct ForkedWorker {
  std::string output;
  int status = 0;
};

// Forks a worker that runs `body` on a session on `agent`'s channel (grace `grace`; `body` ends
// the process itself); here, accepts its channel, reads its hello, hands it round 1's place
// `place`, and reads its stderr until it exits.
ForkedWorker run_forked_worker(ddp::test::ScriptedAgent& agent, std::chrono::milliseconds grace,
                               const std::map<std::string, std::string>& place,
                               const std::function<void(ddp::train::RecoverySession&)>& body) {
  int err[2];
  REQUIRE(::pipe(err) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    auto session = forked_session_on(agent, err, grace);
    body(*session);
    std::_Exit(1);  // (the body ends the process)
  }
  ::close(err[1]);
  agent.accept();
  agent.read_line();
  agent.send_place(1, place);
  ForkedWorker worker;
  worker.output = output_until_exit(err[0], child, worker.status);
  return worker;
}

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

// A real Gloo pair of ranks in threads: rank 1 connects, then stays away from the collectives
// with its connections open (a node whose link is cut sends no FIN) until released. Rank 0's
// group is what a worker trains with.
class CutPeerGlooPair {
 public:
  CutPeerGlooPair() {
    auto store = std::shared_ptr<ddp::rdzv::BlockingStore>(ddp::rdzv::BlockingStore::in_memory());
    ddp::coll::GlooOptions options;
    options.timeout = 60s;  // far above any abort: a wait that ran into it is no abort
    options.arrival_grace = 0ms;
    options.algorithm = ddp::coll::AllreduceAlgorithm::kRing;  // TCP, as between two nodes
    peer_ = std::thread([this, store, options] {
      auto peer = ddp::coll::GlooProcessGroup::create(store, 1, 2, options);
      std::unique_lock lock(mutex_);
      released_cv_.wait(lock, [&] { return released_; });
    });
    group_ = ddp::coll::GlooProcessGroup::create(store, 0, 2, options);
  }
  ~CutPeerGlooPair() {
    {
      std::lock_guard lock(mutex_);
      released_ = true;
    }
    released_cv_.notify_all();
    peer_.join();
  }
  std::shared_ptr<ddp::coll::GlooProcessGroup> group() const { return group_; }
  // An all_reduce rank 1 never joins: the message of the IoError it ends with, or how it ended.
  std::string blocked_all_reduce() const {
    float value = 1.0f;
    try {
      group_->all_reduce(ddp::Tensor{&value, 1, ddp::DType::kFloat32}, ddp::ReduceOp::kSum)->wait();
      return "completed";
    } catch (const ddp::IoError& e) {
      return e.what();
    } catch (const std::exception& e) {
      return std::string("not an IoError: ") + e.what();
    }
  }

 private:
  std::mutex mutex_;
  std::condition_variable released_cv_;
  bool released_ = false;
  std::thread peer_;
  std::shared_ptr<ddp::coll::GlooProcessGroup> group_;
};

TEST_CASE("issue 34: a round that lost a member aborts a Gloo group blocked on a cut peer",
          "[recovery]") {
  ddp::test::ScriptedAgent agent;
  auto session = session_on(agent, 10s);
  CutPeerGlooPair pair;
  session->watch(pair.group());
  std::thread announcer([&] {
    std::this_thread::sleep_for(200ms);  // the training thread is blocked by then
    agent.send_place(1, {{"WORLD_SIZE", "1"}, {"RANK", "0"}});
  });
  const std::string error = pair.blocked_all_reduce();
  announcer.join();
  CHECK_THAT(error, Catch::StartsWith("gloo all_reduce #1 aborted on rank 0"));
  CHECK(pair.group()->is_aborted());
  CHECK_THROWS_AS(session->check_new_round(), ddp::train::RoundChanged);
}

TEST_CASE("issue 34: an overdue place frees a Gloo group blocked on a cut peer; the process stays",
          "[recovery]") {
  ddp::test::ScriptedAgent agent;
  // The worker: blocked in a collective when a joining node's round arrives (no abort on arrival).
  const ForkedWorker worker =
      run_forked_worker(agent, 1s, {{"WORLD_SIZE", "3"}}, [](ddp::train::RecoverySession& session) {
        CutPeerGlooPair pair;
        session.watch(pair.group());
        const std::string error = pair.blocked_all_reduce();
        std::fprintf(stderr, "training thread: %s\n", error.c_str());
        std::fflush(stderr);
        std::_Exit(0);  // well before the next grace, which would give the process up
      });
  INFO(worker.output);
  REQUIRE(WIFEXITED(worker.status));
  CHECK(WEXITSTATUS(worker.status) == 0);
  // Only the session aborts the group (the client's log line may not be written by the time the
  // child exits).
  CHECK_THAT(worker.output,
             Catch::Contains("training thread: gloo all_reduce #1 aborted on rank 0"));
}

TEST_CASE("issue 29: an overdue place aborts the group, and the next grace gives the process up",
          "[recovery]") {
  ddp::test::ScriptedAgent agent;
  // The worker: a joining node's round, never taken by a training thread.
  const ForkedWorker worker = run_forked_worker(
      agent, 100ms, {{"WORLD_SIZE", "4"}}, [](ddp::train::RecoverySession& session) {
        auto group = std::make_shared<AbortRecordingGroup>(3, /*abortable=*/true);
        session.watch(group);
        group->wait_for_aborts(1);
        ::sleep(10);  // the session's give-up ends the process long before
        std::_Exit(1);
      });
  const std::string& output = worker.output;
  INFO(output);
  REQUIRE(WIFEXITED(worker.status));
  CHECK(WEXITSTATUS(worker.status) == ddp::kReformGiveUpExit);
  const auto aborted = output.find("aborted the nccl group of round -1");
  const auto gave_up = output.find("ending with 75");
  CHECK(aborted != std::string::npos);
  CHECK(gave_up != std::string::npos);
  CHECK(aborted < gave_up);
}
