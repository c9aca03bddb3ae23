// Lines are "<word> [key=value ...]\n"; host names hold no spaces or newlines.

#include "rendezvous/static/static_events.hpp"

#include <fmt/format.h>

#include <charconv>

#include "common/parse_number.hpp"
#include "rendezvous/store/store_lease.hpp"

namespace ddp::rdzv {

namespace {

std::string field(const std::string& line, const std::string& key) {
  const std::string needle = " " + key + "=";
  const auto at = line.find(needle);
  if (at == std::string::npos) return {};
  const auto start = at + needle.size();
  return line.substr(start, line.find(' ', start) - start);
}

}  // namespace

std::string static_lost_line(int node_rank, const std::string& host) {
  return fmt::format("lost node={} host={} by=connection after_ms={}\n", node_rank, host,
                     kLeaseAfterMs);
}

StaticRoundEvents parse_static_events(const Bytes& value) {
  StaticRoundEvents events;
  const std::string text = to_string(value);
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\n', start);
    if (end == std::string::npos) break;
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.starts_with("lost ") && !events.lost) {
      NodeLoss loss;
      loss.node = fmt::format("node {} ({})", field(line, "node"), field(line, "host"));
      loss.detected_by = field(line, "by");
      const std::string ms = field(line, "after_ms");
      if (const auto n = parse_number<long long>(ms)) loss.after = std::chrono::milliseconds(*n);
      events.lost = std::move(loss);
      events.lost_rank = parse_number<int>(field(line, "node")).value_or(events.lost_rank);
    } else if (line == "restart" || line == "failed") {
      events.failed = true;
    }
  }
  return events;
}

std::string describe_loss(const NodeLoss& loss) {
  return fmt::format("{} was lost: its store connection closed and stayed closed for {} ms",
                     loss.node, loss.after.count());
}

}  // namespace ddp::rdzv
