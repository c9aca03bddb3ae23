// Text format details. Integral values print without fmt's shortest-float form so that counters
// read as integers ("12", not "12.0"), which is what promtool and people expect.

#include "common/metrics/text_format.hpp"

#include <fmt/format.h>

#include <cmath>

namespace ddp::metrics {
namespace {

bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Beyond 2^53 not every integer is a double: print those in the general form.
constexpr double kExactIntegerLimit = 9007199254740992.0;

// Backslash and newline always; the double quote only inside a label value.
std::string escape(std::string_view text, bool quote) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c == '\\' || (quote && c == '"')) {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace

std::string format_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::trunc(value) && std::fabs(value) < kExactIntegerLimit) {
    return fmt::format("{}", static_cast<long long>(value));
  }
  return fmt::format("{}", value);
}

std::string escape_label_value(std::string_view value) { return escape(value, true); }

std::string escape_help(std::string_view help) { return escape(help, false); }

bool is_valid_metric_name(std::string_view name) {
  if (name.empty()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (!(is_alpha(c) || c == '_' || c == ':' || (i > 0 && is_digit(c)))) return false;
  }
  return true;
}

bool is_valid_label_name(std::string_view name) {
  if (name.empty() || name.starts_with("__")) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (!(is_alpha(c) || c == '_' || (i > 0 && is_digit(c)))) return false;
  }
  return true;
}

}  // namespace ddp::metrics
