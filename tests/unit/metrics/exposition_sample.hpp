#pragma once
// Test helper: the value of one sample in a Prometheus text exposition.

#include <string>

namespace ddp::metrics::test {

// The value of `series` (the name with its labels, as exposed) in `text`; -1 when missing.
inline double sample(const std::string& text, const std::string& series) {
  const std::string prefix = series + " ";
  for (std::size_t at = text.find(prefix); at != std::string::npos;
       at = text.find(prefix, at + 1)) {
    if (at == 0 || text[at - 1] == '\n') return std::stod(text.substr(at + prefix.size()));
  }
  return -1;
}

}  // namespace ddp::metrics::test
