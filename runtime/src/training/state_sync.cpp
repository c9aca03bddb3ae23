// sync_state: one all_gather of the commit counts, then the broadcasts, all started before the
// first wait so that they overlap as the reducer's buckets do.

#include "ddp/state_sync.hpp"

#include <algorithm>

#include "common/check.hpp"

namespace ddp {

int most_committed_rank(const std::vector<std::int64_t>& counts) {
  DDP_CHECK(!counts.empty(), "most_committed_rank of no ranks");
  // max_element returns the first of equal maxima: the lowest rank.
  return static_cast<int>(std::max_element(counts.begin(), counts.end()) - counts.begin());
}

SyncResult sync_state(ProcessGroup& group, std::int64_t commits, const std::vector<Tensor>& state,
                      const HostExchange& exchange) {
  const auto size = static_cast<std::size_t>(group.size());
  // One buffer: this rank's count first, then the gathered counts (the exchange copies a single
  // host tensor to and from the device).
  std::vector<std::int64_t> buffer(1 + size);
  buffer[0] = commits;
  Tensor whole{buffer.data(), buffer.size(), DType::kInt64};
  auto gather = [&](Tensor t) {
    auto* base = static_cast<std::int64_t*>(t.data);
    Tensor in = t, out = t;
    in.count = 1;
    out.data = base + 1;
    out.count = size;
    return group.all_gather(in, out);
  };
  if (exchange) {
    exchange(whole, gather);
  } else {
    gather(whole)->wait();
  }
  const std::vector<std::int64_t> counts(buffer.begin() + 1, buffer.end());
  SyncResult result{most_committed_rank(counts), 0};
  result.commits = counts[static_cast<std::size_t>(result.root)];
  std::vector<std::shared_ptr<Work>> works;
  for (const Tensor& t : state) works.push_back(group.broadcast(t, result.root));
  for (auto& w : works) w->wait();
  return result;
}

}  // namespace ddp
