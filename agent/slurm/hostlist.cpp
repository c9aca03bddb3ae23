// Native expansion of SLURM hostlist expressions ("node[01-04,07]", "a[1-2]b[3-4]").
#include <cctype>
#include <string>
#include <string_view>
#include <vector>

#include "agent/slurm/slurm.hpp"
#include "common/parse_number.hpp"
#include "ddp/error.hpp"

namespace ddp::agent {
namespace {

// Bounds what one expression may expand to: a typo like "n[1-99999999]" must fail, not OOM.
constexpr std::size_t kMaxHosts = 1'000'000;

[[noreturn]] void malformed(std::string_view expression, std::string_view why) {
  throw ConfigError("malformed SLURM hostlist '" + std::string(expression) + "': " +
                    std::string(why));
}

bool all_digits(std::string_view text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (std::isdigit(static_cast<unsigned char>(c)) == 0) return false;
  }
  return true;
}

// Expands the inside of one bracket ("01-04,07") into zero-padded numbers. The width of the
// lower bound is kept, as scontrol does ("08-11" gives 08 09 10 11).
std::vector<std::string> expand_ranges(std::string_view body, std::string_view expression) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= body.size()) {
    std::size_t comma = body.find(',', start);
    if (comma == std::string_view::npos) comma = body.size();
    std::string_view part = body.substr(start, comma - start);
    std::size_t dash = part.find('-');
    std::string_view low = part.substr(0, dash);
    std::string_view high = dash == std::string_view::npos ? low : part.substr(dash + 1);
    if (!all_digits(low) || !all_digits(high)) {
      malformed(expression, "bad range '" + std::string(part) + "'");
    }
    if (low.size() > 18 || high.size() > 18) malformed(expression, "number too long");
    // Both are 1 to 18 digits (checked above), so they parse.
    const unsigned long long first = *parse_number<unsigned long long>(low);
    const unsigned long long last = *parse_number<unsigned long long>(high);
    if (last < first) malformed(expression, "descending range '" + std::string(part) + "'");
    if (last - first >= kMaxHosts) malformed(expression, "range too large");
    for (unsigned long long n = first; n <= last; ++n) {
      std::string digits = std::to_string(n);
      if (digits.size() < low.size()) digits.insert(0, low.size() - digits.size(), '0');
      out.push_back(std::move(digits));
    }
    start = comma + 1;
  }
  return out;
}

// One top-level item: literal text and bracket groups, expanded as a cartesian product with the
// leftmost bracket varying slowest.
void expand_item(std::string_view item, std::string_view expression,
                 std::vector<std::string>& out) {
  if (item.empty()) malformed(expression, "empty host name");
  std::vector<std::string> partial{""};
  std::size_t pos = 0;
  while (pos < item.size()) {
    std::size_t open = item.find('[', pos);
    std::string_view literal =
        item.substr(pos, open == std::string_view::npos ? item.npos : open - pos);
    if (literal.find(']') != std::string_view::npos) malformed(expression, "unmatched ']'");
    for (auto& p : partial) p += literal;
    if (open == std::string_view::npos) break;
    std::size_t close = item.find(']', open);
    if (close == std::string_view::npos) malformed(expression, "unmatched '['");
    std::string_view body = item.substr(open + 1, close - open - 1);
    if (body.find('[') != std::string_view::npos) malformed(expression, "nested '['");
    std::vector<std::string> numbers = expand_ranges(body, expression);
    if (partial.size() * numbers.size() > kMaxHosts) malformed(expression, "too many hosts");
    std::vector<std::string> next;
    next.reserve(partial.size() * numbers.size());
    for (const auto& p : partial) {
      for (const auto& n : numbers) next.push_back(p + n);
    }
    partial = std::move(next);
    pos = close + 1;
  }
  for (auto& p : partial) out.push_back(std::move(p));
}

}  // namespace

std::vector<std::string> expand_hostlist(std::string_view expression) {
  std::vector<std::string> hosts;
  if (expression.empty()) malformed(expression, "empty");
  // Why the depth counter: commas inside brackets separate ranges, not hosts.
  int depth = 0;
  std::size_t item_start = 0;
  for (std::size_t i = 0; i <= expression.size(); ++i) {
    char c = i < expression.size() ? expression[i] : ',';
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0 || depth > 1) malformed(expression, "unbalanced brackets");
    if (c == ',' && depth == 0) {
      expand_item(expression.substr(item_start, i - item_start), expression, hosts);
      item_start = i + 1;
    }
  }
  if (depth != 0) malformed(expression, "unmatched '['");
  if (hosts.size() > kMaxHosts) malformed(expression, "too many hosts");
  return hosts;
}

}  // namespace ddp::agent
