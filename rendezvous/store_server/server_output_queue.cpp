// OutputQueue: a vector of chunks, consumed from a head index. Small writes coalesce into the last
// owned chunk (up to kShareBytes) so that a batch of small replies goes out in one write, as one
// buffer.

#include "rendezvous/store_server/server_output_queue.hpp"

#include <cassert>

namespace ddp::rdzv {

wire::Buffer& OutputQueue::tail() {
  if (sealed_ || chunks_.size() == head_ || chunks_.back().shared ||
      chunks_.back().owned.size() >= kShareBytes) {
    chunks_.emplace_back();
    sealed_ = false;
  }
  return chunks_.back().owned;
}

void OutputQueue::append(std::span<const std::uint8_t> bytes) {
  if (bytes.empty()) return;
  if (bytes.size() >= kShareBytes) {
    chunks_.push_back(Chunk{wire::Buffer(bytes.begin(), bytes.end()), nullptr});
    sealed_ = false;
  } else {
    auto& out = tail();
    out.insert(out.end(), bytes.begin(), bytes.end());
  }
  bytes_ += bytes.size();
}

void OutputQueue::append_value(const SharedValue& value) {
  const std::size_t size = value ? value->size() : 0;
  auto& out = tail();
  wire::append_u64(out, size);
  bytes_ += wire::kLengthBytes;
  if (size == 0) return;
  if (size < kShareBytes) {
    out.insert(out.end(), value->begin(), value->end());
  } else {
    chunks_.push_back(Chunk{{}, value});
    sealed_ = false;
  }
  bytes_ += size;
}

void OutputQueue::consume(std::size_t n) {
  assert(n <= bytes_);
  bytes_ -= n;
  while (n > 0) {
    Chunk& front = chunks_[head_];
    const std::size_t left = front.bytes().size() - offset_;
    if (n < left) {
      offset_ += n;
      return;
    }
    n -= left;
    offset_ = 0;
    if (bytes_ == 0 && head_ + 1 == chunks_.size() && !front.shared &&
        front.owned.capacity() <= kKeepBytes) {
      // The last chunk, small: kept empty for the next reply, so that a request-reply client
      // costs no allocation per request.
      front.owned.clear();
      break;
    }
    front = Chunk{};  // frees its buffer, or drops its share of the value
    ++head_;
  }
  if (bytes_ == 0) {
    if (head_ < chunks_.size() && chunks_.capacity() <= 4) {
      if (head_ != 0) chunks_.front() = std::move(chunks_[head_]);
      chunks_.resize(1);
    } else {
      chunks_ = {};  // after a large reply the connection holds no buffer at all
    }
    head_ = 0;
    sealed_ = false;  // nothing is being written
  } else if (head_ >= 64 && head_ * 2 >= chunks_.size()) {
    chunks_.erase(chunks_.begin(), chunks_.begin() + static_cast<std::ptrdiff_t>(head_));
    head_ = 0;
  }
}

}  // namespace ddp::rdzv
