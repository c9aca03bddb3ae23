// ShmCollectives. Set-up is two store rounds: each rank publishes its domain and segment name (or
// why it has none), maps its peers' segments and publishes whether that worked; the answer is
// unanimous, so either every rank uses shared memory or none does. Each creator unlinks its name
// after the second round, when every peer has mapped it (or given up).
#include "collectives/shm/shm_collectives.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>
#include <random>

#include "collectives/shm/peer_flags.hpp"
#include "common/log.hpp"

namespace ddp::coll::shm {
namespace {

// The flags take the first page, the two slots follow.
constexpr std::size_t kHeaderBytes = 4096;
constexpr std::size_t kSegmentBytes = kHeaderBytes + 2 * ShmCollectives::kSlotBytes;
static_assert(sizeof(PeerFlags) <= kHeaderBytes);

rdzv::Bytes bytes_of(const std::string& s) { return rdzv::Bytes(s.begin(), s.end()); }
std::string text_of(const rdzv::Bytes& b) { return std::string(b.begin(), b.end()); }

std::string new_segment_name() {
  static std::atomic<unsigned> counter{0};
  std::random_device random;
  return fmt::format("/ddp-{}-{}-{:08x}", ::getpid(), counter++, random());
}

// Elements [lo, hi) of an n-element chunk that `rank` of `size` reduces: equal shares rounded up
// to a cache line, so that two ranks never write the same line.
std::pair<std::size_t, std::size_t> share_of(std::size_t n, std::size_t element, int rank,
                                             int size) {
  const std::size_t line = std::max<std::size_t>(1, 64 / element);
  std::size_t per = (n + static_cast<std::size_t>(size) - 1) / static_cast<std::size_t>(size);
  per = (per + line - 1) / line * line;
  const std::size_t lo = std::min(n, per * static_cast<std::size_t>(rank));
  return {lo, std::min(n, lo + per)};
}

}  // namespace

std::unique_ptr<ShmCollectives> ShmCollectives::connect(
    rdzv::BlockingStore& store, int rank, int size, const std::vector<int>& global_ranks,
    std::chrono::milliseconds timeout, Refusal& refusal, const std::string& domain) {
  std::vector<SharedSegment> segments(static_cast<std::size_t>(size));
  std::string problem;
  try {
    segments[rank] = SharedSegment::create(new_segment_name(), kSegmentBytes);
    auto* flags = new (segments[rank].data()) PeerFlags{};
    flags->pid = static_cast<std::int32_t>(::getpid());
  } catch (const std::exception& e) {
    problem = fmt::format("rank {}: {}", global_ranks[rank], e.what());
  }
  // "<domain>\n<segment name>", or "<domain>\n\n<why there is none>" so that every peer can
  // quote the creator's own reason (say, a full /dev/shm) whichever rank reports first.
  store.set(fmt::format("segment/{}", rank),
            bytes_of(domain + "\n" + (problem.empty() ? segments[rank].name() : "\n" + problem)));

  // Every rank reads every entry, so every rank sees the same domains and decides alike whether
  // the group spans hosts.
  std::vector<std::string> names(static_cast<std::size_t>(size));
  std::vector<std::string> missing(static_cast<std::size_t>(size));
  refusal.domains.assign(static_cast<std::size_t>(size), domain);
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    const std::string entry = text_of(store.get(fmt::format("segment/{}", peer), timeout));
    const auto newline = entry.find('\n');
    refusal.domains[peer] = entry.substr(0, newline);
    if (refusal.domains[peer] != domain && !refusal.elsewhere) {
      refusal.elsewhere = true;
      refusal.reason = fmt::format(
          "ranks {} and {} are not on one host (or not in one mount, network and pid namespace)",
          global_ranks[rank], global_ranks[peer]);
    }
    const std::string rest = newline == std::string::npos ? "" : entry.substr(newline + 1);
    if (!rest.empty() && rest.front() == '\n') {
      missing[peer] = rest.substr(1);
    } else {
      names[peer] = rest;
    }
  }
  if (refusal.elsewhere) problem = refusal.reason;

  for (int peer = 0; peer < size && problem.empty(); ++peer) {
    if (peer == rank) continue;
    if (names[peer].empty()) {
      problem = missing[peer].empty()
                    ? fmt::format("rank {} has no shared segment", global_ranks[peer])
                    : missing[peer];
      continue;
    }
    try {
      segments[peer] = SharedSegment::open(names[peer], kSegmentBytes);
    } catch (const std::exception& e) {
      problem = fmt::format("rank {}: {}", global_ranks[rank], e.what());
    }
  }

  store.set(fmt::format("mapped/{}", rank), bytes_of(problem.empty() ? "ok" : problem));
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    const std::string answer = text_of(store.get(fmt::format("mapped/{}", peer), timeout));
    if (answer != "ok" && problem.empty()) problem = answer;
  }
  segments[rank].unlink();  // every peer has mapped it or given up
  if (!problem.empty()) {
    refusal.reason = problem;
    return nullptr;
  }
  return std::unique_ptr<ShmCollectives>(
      new ShmCollectives(rank, global_ranks, std::move(segments)));
}

ShmCollectives::ShmCollectives(int rank, std::vector<int> global_ranks,
                               std::vector<SharedSegment> segments)
    : rank_(rank),
      size_(static_cast<int>(segments.size())),
      global_ranks_(std::move(global_ranks)),
      segments_(std::move(segments)) {
  for (auto& segment : segments_) flags_.push_back(reinterpret_cast<PeerFlags*>(segment.data()));
}

std::byte* ShmCollectives::slot(int rank, int which) const {
  return segments_[rank].data() + kHeaderBytes + static_cast<std::size_t>(which) * kSlotBytes;
}

void ShmCollectives::barrier(std::chrono::steady_clock::time_point deadline) {
  ++generation_;
  announce(*flags_[rank_], generation_);
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_) await(*flags_[peer], generation_, deadline, global_ranks_[peer], aborted_);
  }
}

void ShmCollectives::all_reduce(const Tensor& t, ReduceFn reduce,
                                std::chrono::steady_clock::time_point deadline, int divide_by) {
  const std::size_t element = dtype_size(t.dtype);
  const std::size_t per_chunk = kSlotBytes / element;
  const std::size_t per_block = kBlockBytes / element;
  auto* data = static_cast<std::byte*>(t.data);
  // The share is reduced a block at a time in `block` (in the first-level cache), so each
  // element is read once from every rank and written once to our chunk and once to our slot.
  alignas(64) std::byte block[kBlockBytes];
  for (std::size_t offset = 0; offset < t.count; offset += per_chunk) {
    const std::size_t n = std::min(per_chunk, t.count - offset);
    const int which = static_cast<int>(chunks_++ % 2);
    std::byte* chunk = data + offset * element;
    // copy(peer, offset, bytes) for each peer's non-empty share of this chunk.
    const auto each_peer_share = [&](auto copy) {
      for (int peer = 0; peer < size_; ++peer) {
        if (peer == rank_) continue;
        const auto [a, b] = share_of(n, element, peer, size_);
        if (b > a) copy(peer, a * element, (b - a) * element);
      }
    };
    // Only the peers' shares go into our slot: we read our own share from the chunk itself.
    each_peer_share([&](int, std::size_t at, std::size_t bytes) {
      std::memcpy(slot(rank_, which) + at, chunk + at, bytes);
    });
    barrier(deadline);  // every rank's chunk is readable

    const auto [lo, hi] = share_of(n, element, rank_, size_);
    const auto input = [&](int r, std::size_t at) -> const std::byte* {
      return r == rank_ ? chunk + at : slot(r, which) + at;
    };
    for (std::size_t i = lo; i < hi; i += per_block) {
      const std::size_t m = std::min(per_block, hi - i);
      const std::size_t at = i * element;
      reduce(block, input(0, at), input(1, at), m);
      for (int peer = 2; peer < size_; ++peer) reduce(block, block, input(peer, at), m);
      if (divide_by > 1) divide_by_count(Tensor{block, m, t.dtype}, divide_by);
      std::memcpy(chunk + at, block, m * element);
      std::memcpy(slot(rank_, which) + at, block, m * element);
    }
    barrier(deadline);  // every share is reduced and published

    each_peer_share([&](int peer, std::size_t at, std::size_t bytes) {
      std::memcpy(chunk + at, slot(peer, which) + at, bytes);
    });
  }
}

void ShmCollectives::broadcast(const Tensor& t, int root,
                               std::chrono::steady_clock::time_point deadline) {
  auto* data = static_cast<std::byte*>(t.data);
  const std::size_t bytes = t.bytes();
  for (std::size_t offset = 0; offset < bytes; offset += kSlotBytes) {
    const std::size_t n = std::min(kSlotBytes, bytes - offset);
    const int which = static_cast<int>(chunks_++ % 2);
    if (rank_ == root) std::memcpy(slot(root, which), data + offset, n);
    // One barrier a chunk is enough: a rank announces the next chunk's barrier only after it
    // copied this one out, and the root overwrites this slot two chunks later.
    barrier(deadline);
    if (rank_ != root) std::memcpy(data + offset, slot(root, which), n);
  }
}

void ShmCollectives::all_gather(const Tensor& in, const Tensor& out,
                                std::chrono::steady_clock::time_point deadline) {
  const auto* input = static_cast<const std::byte*>(in.data);
  auto* output = static_cast<std::byte*>(out.data);
  const std::size_t bytes = in.bytes();
  for (std::size_t offset = 0; offset < bytes; offset += kSlotBytes) {
    const std::size_t n = std::min(kSlotBytes, bytes - offset);
    const int which = static_cast<int>(chunks_++ % 2);
    std::memcpy(slot(rank_, which), input + offset, n);
    barrier(deadline);  // as in broadcast: one barrier a chunk
    for (int peer = 0; peer < size_; ++peer) {
      std::memcpy(output + static_cast<std::size_t>(peer) * bytes + offset, slot(peer, which), n);
    }
  }
}

}  // namespace ddp::coll::shm
