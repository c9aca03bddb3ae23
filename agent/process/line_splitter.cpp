// LineTail: the ring behind the stderr tail of failure reports. Slots are reused, so a chatty
// worker costs no allocation per line once the ring is warm.

#include "agent/process/line_splitter.hpp"

namespace ddp::agent {

void LineTail::push(std::string_view line) {
  if (ring_.empty()) return;
  ring_[next_].assign(line.substr(0, max_line_bytes_));
  next_ = (next_ + 1) % ring_.size();
  if (count_ < ring_.size()) ++count_;
}

std::vector<std::string> LineTail::lines() const {
  std::vector<std::string> out;
  out.reserve(count_);
  const size_t first = (next_ + ring_.size() - count_) % (ring_.empty() ? 1 : ring_.size());
  for (size_t i = 0; i < count_; ++i) out.push_back(ring_[(first + i) % ring_.size()]);
  return out;
}

}  // namespace ddp::agent
