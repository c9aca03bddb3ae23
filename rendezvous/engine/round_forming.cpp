// Forming a round. Nothing here polls a round that is about to close: the backend's wait returns
// as soon as the header is there, and the counts come only at the wakes the rules set (the
// progress line, a re-count while members are missing, the last call, the deadline). Every
// waiting node counts at those wakes, so the backends stretch the progress period with max_nodes.

#include "rendezvous/engine/round_forming.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "ddp/error.hpp"
#include "rendezvous/engine/rdzv_log.hpp"

namespace ddp::rdzv {

using Clock = std::chrono::steady_clock;

namespace {

// The most joined nodes the timeout's message names.
constexpr int kNamedJoins = 16;

// (Messages are built outside coroutines: GCC 12 miscompiles some format calls inside them.)
std::string timeout_message(const RoundSettings& settings, const FormingRules& rules, int joined,
                            std::vector<std::string> names) {
  if (joined > kNamedJoins) names.push_back(fmt::format("and {} more", joined - kNamedJoins));
  return fmt::format(
      "{} rendezvous run={} round={} timed out after {:.0f} s (join_timeout): {}/{} nodes joined "
      "(--nnodes {}:{}), {} more needed; joined: {}",
      rules.backend, settings.run_id, rules.round, seconds(settings.join_timeout), joined,
      settings.min_nodes, settings.min_nodes, settings.max_nodes,
      std::max(settings.min_nodes - joined, 0),
      names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", ")));
}

void log_progress(const std::string& run_id, int round, int arrived, int target, double left,
                  bool last_call) {
  logger()->warn("{}/{} nodes joined round {} of run {}; waiting up to {:.0f} s{}", arrived, target,
                 round, run_id, left,
                 last_call ? " (then the round closes with the nodes that came)" : "");
}

}  // namespace

asio::awaitable<void> form_round(FormingRound& round, const RoundSettings& settings,
                                 const FormingRules& rules, int index, int expected,
                                 Clock::time_point deadline) {
  const int min_nodes = settings.min_nodes;
  const int max_nodes = settings.max_nodes;
  if (index == max_nodes || (expected >= min_nodes && index == expected)) {
    co_await round.close(index);
  }
  std::optional<Clock::time_point> last_call;
  if (index >= min_nodes) last_call = Clock::now() + settings.last_call_timeout;
  int arrived = index;
  Clock::time_point next_progress = Clock::now() + rules.progress_period;
  for (;;) {
    Clock::time_point wake = std::min(deadline, next_progress);
    if (round.recounts(expected, arrived))
      wake = std::min(wake, Clock::now() + rules.recount_period);
    if (last_call) wake = std::min(wake, *last_call);
    const bool closed = co_await round.wait_closed(wake);
    if (closed) co_return;
    const Arrivals count = co_await round.count(expected);
    arrived = count.arrived;
    if (count.alive) {
      // A member of the round before died after this node read how many to expect (its lease or
      // record still counted then): the round closes once every member still alive has come,
      // not at the last call.
      if (*count.alive < expected) {
        logger()->info("round {} of run {} now expects {} node(s): a member of round {} was lost",
                       rules.round, settings.run_id, *count.alive, rules.round - 1);
        expected = *count.alive;
      }
      if (expected >= min_nodes && arrived >= expected) {
        co_await round.close(std::min(arrived, max_nodes));
        continue;
      }
    }
    if (last_call && Clock::now() >= *last_call) {
      co_await round.close(std::min(arrived, max_nodes));
      // The header comes on the wait; a close it does not follow (one that found too few) is
      // tried again a whole last call later, not at every wake.
      last_call = Clock::now() + settings.last_call_timeout;
      continue;
    }
    if (Clock::now() >= deadline) {
      std::vector<std::string> names =
          co_await round.joined_names(std::min(arrived, kNamedJoins));  // (not inside throw)
      throw TimeoutError(timeout_message(settings, rules, arrived, std::move(names)));
    }
    co_await round.throw_if_closed();
    if (!last_call && arrived >= min_nodes) last_call = Clock::now() + settings.last_call_timeout;
    if (Clock::now() < next_progress) continue;
    next_progress = Clock::now() + rules.progress_period;
    const int target = expected >= min_nodes ? expected
                       : arrived < min_nodes ? min_nodes
                                             : max_nodes;
    const Clock::time_point until = last_call ? std::min(*last_call, deadline) : deadline;
    // Progress shows at the default (warning) level. Under a second left, the round closes or
    // fails at the next wake-up: "waiting up to 0 s" would say nothing.
    const double left = seconds(until - Clock::now());
    if (left >= 1)
      log_progress(settings.run_id, rules.round, arrived, target, left, last_call.has_value());
  }
}

void log_late_join(const std::string& run_id, int round, int size, int max_nodes) {
  if (size < max_nodes) {
    logger()->info(
        "round {} of run {} closed with {} node(s) before this node joined; waiting "
        "for the next round (the running nodes restart to admit it)",
        round, run_id, size);
  } else {
    logger()->info("round {} of run {} is full ({} nodes); standing by for a free slot", round,
                   run_id, size);
  }
}

}  // namespace ddp::rdzv
