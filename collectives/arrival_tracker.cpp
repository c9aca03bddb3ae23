// ArrivalTracker. Why a thread: a rank that arrives just before a peer's deadline must already be
// marked when that peer looks, yet writing the mark inline would add a store round trip to every
// operation. Store errors in the writer are logged and dropped: marks only improve error messages.
#include "collectives/arrival_tracker.hpp"

#include <charconv>
#include <string>

#include "common/log.hpp"
#include "common/parse_number.hpp"

namespace ddp::coll {
namespace {

std::string key_of(int rank) { return "arrived/" + std::to_string(rank); }

std::uint64_t parse_seq(const rdzv::Bytes& value) {
  const std::string_view text(reinterpret_cast<const char*>(value.data()), value.size());
  return parse_number<std::uint64_t>(text).value_or(0);
}

}  // namespace

ArrivalTracker::ArrivalTracker(std::shared_ptr<rdzv::BlockingStore> store, int rank, int size)
    : store_(std::move(store)), rank_(rank), size_(size), writer_([this] { write_loop(); }) {}

ArrivalTracker::~ArrivalTracker() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  writer_.join();
}

void ArrivalTracker::arrive(std::uint64_t seq) {
  bool wake = false;
  {
    std::lock_guard lock(mutex_);
    latest_ = seq;
    wake = writer_idle_;
  }
  // Only an idle writer needs waking: one inside its write interval picks the value up when the
  // interval ends, so a burst of operations costs no context switches.
  if (wake) changed_.notify_all();
}

void ArrivalTracker::write_mark(std::uint64_t seq) {
  const std::string text = std::to_string(seq);
  store_->set(key_of(rank_), rdzv::Bytes(text.begin(), text.end()));
}

void ArrivalTracker::write_loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    writer_idle_ = true;
    changed_.wait(lock, [&] { return stopping_ || latest_ > written_; });
    writer_idle_ = false;
    if (stopping_) return;
    const std::uint64_t seq = latest_;
    lock.unlock();
    try {
      write_mark(seq);
    } catch (const std::exception& e) {
      log::get("coll")->debug("arrival mark not written seq={} error={}", seq, e.what());
    }
    lock.lock();
    written_ = std::max(written_, seq);
    // Coalesce: wait out the interval (or shutdown) before the next write.
    changed_.wait_for(lock, kWriteInterval, [&] { return stopping_; });
  }
}

std::vector<int> ArrivalTracker::missing_ranks(std::uint64_t seq,
                                               std::chrono::milliseconds grace) {
  try {
    write_mark(seq);
  } catch (const std::exception& e) {
    log::get("coll")->warn("cannot mark arrival seq={} error={}", seq, e.what());
  }
  const auto deadline = std::chrono::steady_clock::now() + grace;
  std::vector<int> missing;
  for (;;) {
    missing.clear();
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      bool arrived = false;
      try {
        arrived = store_->check({key_of(r)}) &&
                  parse_seq(store_->get(key_of(r), std::chrono::seconds(5))) >= seq;
      } catch (const std::exception&) {
        arrived = false;
      }
      if (!arrived) missing.push_back(r);
    }
    if (missing.empty() || std::chrono::steady_clock::now() >= deadline) return missing;
    std::this_thread::sleep_for(kWriteInterval);
  }
}

}  // namespace ddp::coll
