// Lines are "<verb> <rest>\n"; <rest> never holds a newline (callers' text is flattened).

#include "rendezvous/engine/round_changes.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <string_view>

#include "common/parse_number.hpp"

namespace ddp::rdzv {

namespace {

std::string one_line(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

Bytes line(const std::string& verb, const std::string& rest) {
  return to_bytes(verb + " " + one_line(rest) + "\n");
}

// "<node> by=<how> after_ms=<n> rank=<r> lws=<n>" (the last two only when the writer knew them).
NodeLoss parse_loss(const std::string& rest, std::optional<LostMember>& member) {
  NodeLoss loss;
  std::optional<int> rank;
  std::optional<int> lws;
  std::size_t start = 0;
  bool first = true;
  while (start <= rest.size()) {
    const std::size_t end = std::min(rest.find(' ', start), rest.size());
    const std::string field = rest.substr(start, end - start);
    start = end + 1;
    if (first) {
      loss.node = field;
      first = false;
    } else if (field.starts_with("by=")) {
      loss.detected_by = field.substr(3);
    } else if (field.starts_with("after_ms=")) {
      const std::string_view value = std::string_view(field).substr(9);
      if (const auto ms = parse_leading_number<long long>(value)) {
        loss.after = std::chrono::milliseconds(*ms);
      }
    } else if (field.starts_with("rank=")) {
      rank = parse_number<int>(std::string_view(field).substr(5));
    } else if (field.starts_with("lws=")) {
      lws = parse_number<int>(std::string_view(field).substr(4));
    }
  }
  if (rank && lws && *rank >= 0 && *lws >= 0) member = LostMember{*rank, *lws};
  return loss;
}

std::string joined(const std::vector<std::string>& names) {
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

Bytes lost_line(const std::string& node, const std::string& how, const std::string& after_ms,
                const std::optional<LostMember>& member) {
  std::string rest = node + " by=" + how + " after_ms=" + after_ms;
  if (member) {
    rest += fmt::format(" rank={} lws={}", member->group_rank, member->local_world_size);
  }
  return line("lost", rest);
}
Bytes waiting_line(const std::string& node) { return line("waiting", node); }
Bytes failed_line(const std::string& node, const std::string& what) {
  return line("failed", node + " " + what);
}
Bytes closed_line(const std::string& why) { return line("closed", why); }

RoundChanges parse_changes(const Bytes& log) {
  RoundChanges changes;
  const std::string text = to_string(log);
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) break;  // a line being appended: read it next time
    const std::string entry = text.substr(start, end - start);
    start = end + 1;
    const std::size_t space = entry.find(' ');
    if (space == std::string::npos) continue;
    const std::string verb = entry.substr(0, space);
    const std::string rest = entry.substr(space + 1);
    if (verb == "lost") {
      std::optional<LostMember> member;
      NodeLoss loss = parse_loss(rest, member);
      changes.record_loss(std::move(loss), member);
    } else if (verb == "waiting") {
      changes.add_waiting(rest);
    } else if (verb == "failed") {
      changes.failed.push_back(rest);
    } else if (verb == "closed" && !changes.closed) {
      changes.closed = rest;
    }
  }
  return changes;
}

void RoundChanges::record_loss(NodeLoss loss, const std::optional<LostMember>& member) {
  const auto known = std::find(lost.begin(), lost.end(), loss.node);
  if (known == lost.end()) {
    lost.push_back(loss.node);
    losses.push_back(std::move(loss));
    lost_members.push_back(member);
  } else if (auto& seen = lost_members[known - lost.begin()]; !seen) {
    seen = member;
  }
}

void RoundChanges::add_waiting(const std::string& node) {
  if (std::find(waiting.begin(), waiting.end(), node) == waiting.end()) waiting.push_back(node);
}

std::optional<RoundEvent> RoundChanges::first_event(bool finishing) const {
  if (closed && !(finishing && finished())) {
    return RoundEvent{RoundChange::kPeerFailed, "job closed: " + *closed};
  }
  if (!failed.empty()) {
    return RoundEvent{RoundChange::kPeerFailed, "workers failed on " + failed.front()};
  }
  if (finishing) return std::nullopt;
  if (!lost.empty()) return loss_event();
  if (!waiting.empty()) {
    return RoundEvent{RoundChange::kNodeWaiting, "node(s) waiting to join: " + joined(waiting)};
  }
  return std::nullopt;
}

std::optional<RoundEvent> RoundChanges::loss_event() const {
  if (lost.empty()) return std::nullopt;
  return RoundEvent{RoundChange::kNodeLost, "lost node(s): " + joined(lost), losses};
}

std::optional<RoundEvent> RoundChanges::failure_cause() const {
  // A loss wins over a failure: the failures a loss causes on other nodes spend nothing either.
  if (auto loss = loss_event()) return loss;
  if (auto event = first_event(); event && event->change == RoundChange::kPeerFailed) return event;
  return std::nullopt;
}

int RoundChanges::expected_next(int size, int max_nodes) const {
  const int expected = size - static_cast<int>(lost.size()) + static_cast<int>(waiting.size());
  return std::min(expected, max_nodes);
}

std::string too_few_left(const std::vector<std::string>& lost, int left, int min_nodes,
                         int round) {
  if (lost.empty()) {
    return fmt::format("only {} node(s) remain after round {} (--nnodes min is {})", left, round,
                       min_nodes);
  }
  return fmt::format("only {} node(s) remain after losing {} (--nnodes min is {})", left,
                     fmt::join(lost, ", "), min_nodes);
}

std::string workers_failed_reason(const std::string& node, const std::optional<std::string>& what) {
  return fmt::format("workers failed on node {}{}", node, what ? ": " + *what : std::string{});
}

}  // namespace ddp::rdzv
