// The hang rule. The lagging rank's own record cannot tell "hung" from "computing for a long
// time"; the other ranks' records can: they have issued a collective the lagging rank never
// issued and have been stuck in it as long. Both must last the whole timeout, so a rank that
// progresses, however slowly, resets the clock each time its record changes.

#include "agent/stacks/hang_detector.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <map>

namespace ddp::agent {
namespace {

namespace asio = boost::asio;

std::string who(const RankProgress& r) {
  return fmt::format("rank {} (local_rank {}, pid {})", r.rank, r.local_rank, r.pid);
}

// "rank 3" or "ranks 0,2-7".
std::string ranks_text(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + format_rank_ranges(ranks);
}

std::string last_collective(const ProgressRecord& record) {
  if (record.seq == 0) return "no collective yet";
  return fmt::format("last collective {} #{} ({})", record.op, record.seq,
                     record.in_collective() ? "waiting in it" : "completed");
}

// This node's ranks that have waited the whole timeout in the highest such collective.
std::optional<PeerWait> long_wait(const std::vector<RankProgress>& ranks, double timeout_s,
                                  int node) {
  std::optional<PeerWait> wait;
  for (const auto& r : ranks) {
    if (!r.record || !r.record->in_collective() || r.idle_s < timeout_s) continue;
    if (!wait || r.record->seq > wait->seq) {
      wait = PeerWait{r.record->seq, r.record->op, {}, node, 0};
    }
    if (r.record->seq == wait->seq) {
      wait->ranks.push_back(r.rank);
      wait->waited_s = std::max(wait->waited_s, r.idle_s);
    }
  }
  return wait;
}

// True when some rank of this node has made no progress for the whole timeout (in a collective
// or not: a rank stuck in an earlier collective lags as much as one outside any).
bool has_idle_rank(const std::vector<RankProgress>& ranks, double timeout_s) {
  return std::any_of(ranks.begin(), ranks.end(),
                     [&](const RankProgress& r) { return r.record && r.idle_s >= timeout_s; });
}

}  // namespace

std::optional<HangVerdict> judge_hang(const std::vector<RankProgress>& ranks, double timeout_s) {
  HangVerdict verdict;
  std::vector<std::string> guilty;
  for (const auto& r : ranks) {
    if (!r.remote && r.stopped_s >= timeout_s) {
      verdict.lagging.push_back(r.rank);
      verdict.idle_s = std::max(verdict.idle_s, r.stopped_s);
      verdict.lines.push_back(
          fmt::format("{}: stopped (state T) for {:.1f}s", who(r), r.stopped_s));
      guilty.push_back(fmt::format("rank {} stopped", r.rank));
    }
  }

  // Waiters: stuck in a collective for the whole timeout.
  std::uint64_t highest = 0;
  std::map<std::pair<std::string, std::uint64_t>, std::pair<std::vector<int>, double>> waits;
  for (const auto& r : ranks) {
    if (!r.record || !r.record->in_collective() || r.idle_s < timeout_s) continue;
    highest = std::max(highest, r.record->seq);
    auto& entry = waits[{r.record->op, r.record->seq}];
    entry.first.push_back(r.rank);
    entry.second = std::max(entry.second, r.idle_s);
  }
  std::vector<int> lagging_by_progress;
  for (const auto& r : ranks) {
    if (r.remote || !r.record || r.idle_s < timeout_s || r.record->seq >= highest) continue;
    if (std::find(verdict.lagging.begin(), verdict.lagging.end(), r.rank) !=
        verdict.lagging.end()) {
      continue;
    }
    verdict.lagging.push_back(r.rank);
    verdict.idle_s = std::max(verdict.idle_s, r.idle_s);
    lagging_by_progress.push_back(r.rank);
    verdict.lines.push_back(fmt::format("{}: no progress for {:.1f}s; {}", who(r), r.idle_s,
                                        last_collective(*r.record)));
  }
  if (!lagging_by_progress.empty()) {
    for (const auto& [key, entry] : waits) {
      if (key.second <= 0) continue;
      verdict.lines.push_back(
          fmt::format("{} wait{} in {} #{} for {:.1f}s", ranks_text(entry.first),
                      entry.first.size() == 1 ? "s" : "", key.first, key.second, entry.second));
    }
    const auto& [key, entry] = *waits.rbegin();
    guilty.push_back(fmt::format("{} made no progress while {} wait{} in {} #{}",
                                 ranks_text(lagging_by_progress), ranks_text(entry.first),
                                 entry.first.size() == 1 ? "s" : "", key.first, key.second));
  }
  if (verdict.lagging.empty()) return std::nullopt;
  std::sort(verdict.lagging.begin(), verdict.lagging.end());
  verdict.summary = "hang: ";
  for (std::size_t i = 0; i < guilty.size(); ++i) {
    verdict.summary += (i ? "; " : "") + guilty[i];
  }
  return verdict;
}

asio::awaitable<HangVerdict> watch_for_hang(std::vector<HangTarget> targets,
                                            std::chrono::milliseconds timeout,
                                            std::shared_ptr<HangPeers> peers, int node) {
  using Clock = std::chrono::steady_clock;
  asio::steady_timer timer(co_await asio::this_coro::executor);
  if (timeout.count() <= 0) {
    timer.expires_at(Clock::time_point::max());
    co_await timer.async_wait(asio::use_awaitable);  // until cancelled (throws then)
  }
  const auto tick = std::clamp(timeout / 10, std::chrono::milliseconds(100),
                               std::chrono::milliseconds(1000));
  const double timeout_s = timeout.count() / 1000.0;
  std::vector<std::optional<Clock::time_point>> stopped_since(targets.size());
  std::uint64_t published = 0;  // the highest long wait this node has published
  Clock::time_point last_read{};
  for (;;) {
    timer.expires_after(tick);
    co_await timer.async_wait(asio::use_awaitable);
    const auto now = Clock::now();
    const std::int64_t now_ns = progress_clock_ns();
    std::vector<RankProgress> sample;
    for (std::size_t i = 0; i < targets.size(); ++i) {
      const auto& target = targets[i];
      RankProgress r;
      r.rank = target.worker.rank;
      r.local_rank = target.worker.local_rank;
      r.pid = target.worker.pid;
      r.record = read_progress_record(target.progress_file);
      if (r.record) r.idle_s = static_cast<double>(now_ns - r.record->since_ns) / 1e9;
      const char state = process_state(target.worker.pid);
      if (state == 'T' || state == 't') {
        if (!stopped_since[i]) stopped_since[i] = now;
        r.stopped_s = std::chrono::duration<double>(now - *stopped_since[i]).count();
      } else {
        stopped_since[i].reset();
      }
      sample.push_back(std::move(r));
    }
    if (auto verdict = judge_hang(sample, timeout_s)) co_return std::move(*verdict);
    if (!peers) continue;
    if (auto wait = long_wait(sample, timeout_s, node); wait && wait->seq > published) {
      published = wait->seq;
      co_await peers->publish(std::move(*wait));
    }
    if (!has_idle_rank(sample, timeout_s) || now - last_read < std::chrono::seconds(1)) continue;
    last_read = now;
    const auto remote = co_await peers->read();
    if (!remote || remote->node == node) continue;
    for (int rank : remote->ranks) {
      RankProgress r;
      r.rank = rank;
      r.remote = true;
      r.record = ProgressRecord{remote->seq, remote->seq - 1, 0, 0, remote->op};
      r.idle_s = std::max(timeout_s, remote->waited_s);
      sample.push_back(std::move(r));
    }
    if (auto verdict = judge_hang(sample, timeout_s)) co_return std::move(*verdict);
  }
}

}  // namespace ddp::agent
