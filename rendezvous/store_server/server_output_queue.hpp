#pragma once
// OutputQueue: the bytes one store connection still has to write, in order: small replies copied
// into owned buffers, large values shared with the KeyTable (not copied). Each chunk is freed as
// soon as it is written (but one small buffer, kept for the next reply), so a connection holds no
// large buffer after a large reply. No I/O, one thread.

#include "rendezvous/store/key_table.hpp"
#include "rendezvous/wire/encode.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace ddp::rdzv {

class OutputQueue {
 public:
  // Copies bytes to the end of the queue.
  void append(std::span<const std::uint8_t> bytes);
  // A wire value (u64 length, then its bytes); a missing value (nullptr) is an empty one. Values
  // of kShareBytes or more are queued by reference.
  void append_value(const SharedValue& value);

  // Bytes queued and not yet consumed.
  std::size_t size() const { return bytes_; }
  bool empty() const { return bytes_ == 0; }

  // Calls fn(std::span<const std::uint8_t>) on the first unwritten pieces, in order, for at most
  // `max_pieces` pieces and (past the first) `max_bytes` bytes; returns the pieces passed.
  template <typename Fn>
  std::size_t for_each_front(std::size_t max_pieces, std::size_t max_bytes, Fn fn) const {
    std::size_t pieces = 0;
    std::size_t total = 0;
    std::size_t skip = offset_;
    for (std::size_t i = head_; i < chunks_.size(); ++i) {
      const Chunk& chunk = chunks_[i];
      if (pieces == max_pieces || (pieces > 0 && total >= max_bytes)) break;
      const auto bytes = chunk.bytes().subspan(skip);
      skip = 0;
      fn(bytes);
      total += bytes.size();
      ++pieces;
    }
    return pieces;
  }
  // Drops the first n bytes (written); frees each chunk once it is all written.
  void consume(std::size_t n);
  // Later appends start a new chunk: the pieces handed to a write in progress never move.
  void seal() { sealed_ = true; }

  static constexpr std::size_t kShareBytes = std::size_t{64} << 10;
  // An emptied queue keeps one owned buffer of at most this capacity (and nothing larger).
  static constexpr std::size_t kKeepBytes = 512;

 private:
  struct Chunk {
    wire::Buffer owned;
    SharedValue shared;  // when set, the chunk is this value's bytes
    std::span<const std::uint8_t> bytes() const {
      return shared ? std::span<const std::uint8_t>(*shared) : std::span<const std::uint8_t>(owned);
    }
  };
  // The owned chunk at the end, started anew once the last one is shared or large.
  wire::Buffer& tail();

  // Chunks before head_ are written (and empty). A vector, not a deque: libstdc++'s deque
  // allocates even when empty, and an idle connection should hold nothing.
  std::vector<Chunk> chunks_;
  std::size_t head_ = 0;
  std::size_t offset_ = 0;  // bytes of the chunk at head_ already written
  std::size_t bytes_ = 0;
  bool sealed_ = false;
};

}  // namespace ddp::rdzv
