#pragma once
// FakeLauncher: a WorkerLauncher whose workers are scripted outcomes, not processes (exit codes,
// signals, "runs until stopped"), so the agent's state machine runs in a unit test on one
// io_context. The fake of the seam in agent/core/worker_launcher.hpp (ninja's FakeCommandRunner).

#include <algorithm>
#include <array>
#include <bit>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/core/worker_launcher.hpp"
#include "common/progress_record.hpp"
#include "ddp/error.hpp"

namespace ddp::agent::test {

// What one worker does once launched.
struct FakeOutcome {
  int exit_code = 0;
  int signal = 0;                          // killed by this signal (exit_code then unused)
  std::chrono::milliseconds after{0};      // since launch
  bool runs_until_stopped = false;         // exits only when the agent stops it
  std::optional<ProgressRecord> progress;  // published at launch, as libddp publishes it

  static FakeOutcome exits(int code, std::chrono::milliseconds after = {}) {
    return {code, 0, after, false, std::nullopt};
  }
  static FakeOutcome killed_by(int signal, std::chrono::milliseconds after = {}) {
    return {0, signal, after, false, std::nullopt};
  }
  static FakeOutcome until_stopped() { return {0, 0, {}, true, std::nullopt}; }
  // Runs until stopped, its progress record unchanged for `idle` already: `seq` collectives
  // issued (the last one `op`), `completed` of them done.
  static FakeOutcome stuck_at(std::uint64_t seq, std::uint64_t completed, std::chrono::seconds idle,
                              std::string op = "all_reduce") {
    ProgressRecord record;
    record.seq = seq;
    record.completed = completed;
    record.since_ns = progress_clock_ns() - std::chrono::nanoseconds(idle).count();
    record.op = std::move(op);
    return {0, 0, {}, true, std::move(record)};
  }
};

// Writes `record` at `path` in the file format of common/progress_record.hpp (a whole record:
// generation 0), as a worker's ProgressWriter would have left it.
inline void write_progress_file(const std::string& path, const ProgressRecord& record) {
  static_assert(std::endian::native == std::endian::little, "the format is little-endian");
  std::array<char, kProgressRecordBytes> bytes{};
  const auto put = [&](std::size_t offset, auto value) {
    std::memcpy(bytes.data() + offset, &value, sizeof(value));
  };
  std::memcpy(bytes.data(), kProgressMagic, sizeof(kProgressMagic));
  put(16, record.seq);
  put(24, record.completed);
  put(32, record.since_ns);
  put(40, static_cast<std::uint32_t>(record.pid));
  std::memcpy(bytes.data() + 48, record.op.data(), std::min<std::size_t>(record.op.size(), 15));
  std::ofstream(path, std::ios::binary).write(bytes.data(), bytes.size());
}

using FakeAttempt = std::vector<FakeOutcome>;  // one outcome per local rank

// What replace() starts: the outcome of the process taking `spec`'s local rank, and its pid.
using FakeReplacer = std::function<std::pair<FakeOutcome, pid_t>(const WorkerSpec& spec)>;

// One attempt's scripted workers. Scripted exits happen while the agent waits for them
// (wait_first_failure); stop() ends the others as if the signal killed them.
class FakeWorkers final : public AttemptWorkers {
 public:
  FakeWorkers(std::vector<WorkerSpec> specs, FakeAttempt script, pid_t first_pid,
              std::vector<int>& stop_signals, std::vector<int>& sent_signals,
              std::vector<int>& worker_stops, FakeReplacer replacer)
      : specs_(std::move(specs)),
        script_(std::move(script)),
        exited_(specs_.size(), false),
        started_(specs_.size(), std::chrono::steady_clock::now()),
        stop_signals_(stop_signals),
        sent_signals_(sent_signals),
        worker_stops_(worker_stops),
        replacer_(std::move(replacer)) {
    for (std::size_t i = 0; i < specs_.size(); ++i) {
      pids_.push_back(first_pid + static_cast<pid_t>(i));
    }
  }

  boost::asio::awaitable<std::optional<WorkerExit>> wait_first_failure() override {
    namespace asio = boost::asio;
    asio::steady_timer timer(co_await asio::this_coro::executor);
    for (;;) {
      std::optional<std::size_t> next;  // the earliest scripted exit still to come
      for (std::size_t i = 0; i < specs_.size(); ++i) {
        if (exited_[i] || script_[i].runs_until_stopped) continue;
        if (!next || started_[i] + script_[i].after < started_[*next] + script_[*next].after) {
          next = i;
        }
      }
      if (!next) {
        if (std::find(exited_.begin(), exited_.end(), false) == exited_.end()) {
          co_return std::nullopt;  // every one exited 0 (a failed one was returned, or replaced)
        }
        timer.expires_at(std::chrono::steady_clock::time_point::max());
        co_await timer.async_wait(asio::use_awaitable);  // until the agent's race cancels it
      }
      timer.expires_at(started_[*next] + script_[*next].after);
      co_await timer.async_wait(asio::use_awaitable);  // throws when cancelled
      record(*next, script_[*next].exit_code, script_[*next].signal, false);
      if (exits_.back().failed()) co_return exits_.back();
    }
  }

  pid_t replace(const WorkerSpec& spec) override {
    std::size_t i = 0;
    while (i < specs_.size() && specs_[i].local_rank != spec.local_rank) ++i;
    if (i == specs_.size() || !exited_[i]) {
      throw IoError("fake workers: replace() of a local rank that did not exit");
    }
    for (WorkerExit& exit : exits_) {
      if (exit.pid == pids_[i]) exit.replaced = true;
    }
    auto [outcome, pid] = replacer_(spec);
    specs_[i] = spec;
    script_[i] = std::move(outcome);
    pids_[i] = pid;
    exited_[i] = false;
    started_[i] = std::chrono::steady_clock::now();
    return pid;
  }

  void signal_all(int signal) override { sent_signals_.push_back(signal); }

  boost::asio::awaitable<void> stop_worker(int local_rank, int signal,
                                           std::chrono::milliseconds) override {
    for (std::size_t i = 0; i < specs_.size(); ++i) {
      if (specs_[i].local_rank != local_rank || exited_[i]) continue;
      worker_stops_.push_back(local_rank);
      record(i, 0, signal, true);
    }
    co_return;
  }

  boost::asio::awaitable<std::vector<WorkerExit>> stop(int signal,
                                                       std::chrono::milliseconds) override {
    stop_signals_.push_back(signal);
    for (std::size_t i = 0; i < specs_.size(); ++i) {
      if (!exited_[i]) record(i, 0, signal, true);
    }
    co_return exits_;
  }

  const std::vector<WorkerExit>& exits() const override { return exits_; }

  std::vector<pid_t> pids() const override { return pids_; }

 private:
  void record(std::size_t i, int exit_code, int signal, bool by_agent) {
    WorkerExit exit;
    exit.local_rank = specs_[i].local_rank;
    exit.rank = specs_[i].rank;
    exit.pid = pids_[i];
    exit.exit_code = exit_code;
    exit.signal = signal;
    exit.wall_time = std::chrono::system_clock::now();
    exit.mono_time = std::chrono::steady_clock::now();
    exit.stopped_by_agent = by_agent;
    exit.agent_signal = by_agent ? signal : 0;
    exit.error_file = specs_[i].error_file;
    exits_.push_back(std::move(exit));
    exited_[i] = true;
  }

  std::vector<WorkerSpec> specs_;
  FakeAttempt script_;
  std::vector<pid_t> pids_;
  std::vector<bool> exited_;
  std::vector<std::chrono::steady_clock::time_point> started_;  // each process's start
  std::vector<WorkerExit> exits_;
  std::vector<int>& stop_signals_;
  std::vector<int>& sent_signals_;
  std::vector<int>& worker_stops_;
  FakeReplacer replacer_;
};

// Launches attempt i with the i-th script, and the n-th process a replace() starts with the n-th
// of `replacements`; a launch or a replacement past its script throws IoError, so an unexpected
// restart fails the test instead of looping.
class FakeLauncher final : public WorkerLauncher {
 public:
  explicit FakeLauncher(std::vector<FakeAttempt> attempts,
                        std::vector<FakeOutcome> replacements = {})
      : attempts_(std::move(attempts)), replacements_(std::move(replacements)) {}

  std::unique_ptr<AttemptWorkers> launch(const std::vector<WorkerSpec>& specs,
                                         const OutputOptions&) override {
    const std::size_t attempt = launched.size();
    if (attempt >= attempts_.size()) throw IoError("fake launcher: no attempt scripted");
    if (attempts_[attempt].size() != specs.size()) {
      throw IoError("fake launcher: the script's worker count differs from the specs'");
    }
    launched.push_back(specs);
    for (std::size_t i = 0; i < specs.size(); ++i) {
      if (const auto& record = attempts_[attempt][i].progress) {
        write_progress_file(specs[i].ddprun_env.at(kProgressFileEnv), *record);
      }
    }
    // Pids above Linux's PID_MAX_LIMIT (2^22): no process has them, so what the agent reads in
    // /proc or signals for a fake worker (stack reports, hang checks) finds nothing.
    const auto first_pid = static_cast<pid_t>(10'000'000 + 1000 * attempt);
    return std::make_unique<FakeWorkers>(
        specs, attempts_[attempt], first_pid, stop_signals, sent_signals, worker_stops,
        [this](const WorkerSpec& spec) { return next_replacement(spec); });
  }

  std::vector<std::vector<WorkerSpec>> launched;  // each launch's specs, in order
  std::vector<WorkerSpec> replaced;               // each replace()'s spec, in order
  std::vector<int> stop_signals;                  // each stop()'s signal, over all attempts
  std::vector<int> sent_signals;                  // each signal_all()'s signal
  std::vector<int> worker_stops;                  // each stop_worker()'s local rank that ran

 private:
  std::pair<FakeOutcome, pid_t> next_replacement(const WorkerSpec& spec) {
    const std::size_t n = replaced.size();
    if (n >= replacements_.size()) throw IoError("fake launcher: no replacement scripted");
    replaced.push_back(spec);
    return {replacements_[n], static_cast<pid_t>(11'000'000 + n)};  // above PID_MAX_LIMIT too
  }

  std::vector<FakeAttempt> attempts_;
  std::vector<FakeOutcome> replacements_;
};

}  // namespace ddp::agent::test
