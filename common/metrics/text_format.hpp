#pragma once
// The pieces of Prometheus' text exposition format 0.0.4 that need care: numbers, escaping, and
// which names are valid. Pure functions; Registry::expose() assembles lines from them.

#include <string>
#include <string_view>

namespace ddp::metrics {

// A sample value as Prometheus parses it: integers without a fraction or exponent ("3"),
// others in the shortest form that reads back exactly ("0.25", "1e+20"), "+Inf", "-Inf", "NaN".
std::string format_value(double value);

// A label value between double quotes: backslash, double quote and newline escaped.
std::string escape_label_value(std::string_view value);

// HELP text: backslash and newline escaped (quotes stay as they are).
std::string escape_help(std::string_view help);

// [a-zA-Z_:][a-zA-Z0-9_:]*
bool is_valid_metric_name(std::string_view name);
// [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__" (reserved for Prometheus itself).
bool is_valid_label_name(std::string_view name);

}  // namespace ddp::metrics
