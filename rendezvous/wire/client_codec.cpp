// Request encoding and incremental reply decoding for the TCPStore client. Integers go out
// little-endian byte by byte (PyTorch copies host memory, which is little-endian on every
// platform it ships for), so the bytes are the same on any host.
#include "rendezvous/wire/client_codec.hpp"

#include <algorithm>

#include "common/check.hpp"

namespace ddp::rdzv::wire {

std::uint8_t RequestEncoder::byte_of(Command command) const {
  const auto byte = encode_command(dialect_, command);
  DDP_CHECK(byte.has_value(), "command {} has no byte in this dialect",
            static_cast<int>(command));
  return *byte;
}

void RequestEncoder::put_field(ByteVec& out, const Keys& keys) {
  append_u64(out, keys.size());
  for (const auto& key : keys) append_bytes(out, key);
}

void RequestEncoder::put_field(ByteVec& out, const KeyValues& kvs) {
  append_u64(out, kvs.size());
  for (const auto& [key, value] : kvs) {
    append_bytes(out, key);
    append_bytes(out, value);
  }
}

void ReplyDecoder::expect(ReplyShape shape, std::size_t count) {
  shape_ = shape;
  values_left_ = shape == ReplyShape::kValues ? count : 1;
  in_body_ = false;
  body_left_ = 0;
  scalar_ = 0;
  scalar_bytes_ = 0;
  values_.clear();
  error_.clear();
  done_ = shape == ReplyShape::kValues && count == 0;
  if (shape == ReplyShape::kValues) values_.reserve(count);
}

bool ReplyDecoder::fill_scalar(ByteSpan data, std::size_t& pos, std::size_t width) {
  while (scalar_bytes_ < width && pos < data.size()) {
    scalar_ |= static_cast<std::uint64_t>(data[pos++]) << (8 * scalar_bytes_);
    ++scalar_bytes_;
  }
  return scalar_bytes_ == width;
}

DecodeStatus ReplyDecoder::consume(ByteSpan data, std::size_t& used) {
  std::size_t pos = 0;
  used = 0;
  if (done_) return DecodeStatus::kOk;
  switch (shape_) {
    case ReplyShape::kU8:
    case ReplyShape::kU32:
    case ReplyShape::kI64: {
      const std::size_t width = shape_ == ReplyShape::kU8 ? 1 : shape_ == ReplyShape::kU32 ? 4 : 8;
      done_ = fill_scalar(data, pos, width);
      used = pos;
      return done_ ? DecodeStatus::kOk : DecodeStatus::kNeedMore;
    }
    case ReplyShape::kValue:
    case ReplyShape::kValues:
      break;
  }
  while (values_left_ > 0) {
    if (!in_body_) {
      if (!fill_scalar(data, pos, kLengthBytes)) break;
      if (scalar_ > max_value_bytes_) {
        error_ = "reply value of " + std::to_string(scalar_) + " bytes is past the limit of " +
                 std::to_string(max_value_bytes_);
        used = pos;
        return DecodeStatus::kBad;
      }
      body_left_ = scalar_;
      scalar_ = 0;
      scalar_bytes_ = 0;
      in_body_ = true;
      values_.emplace_back();
      // Reserve what has arrived or a bounded amount, not what the peer claims: a length near
      // the limit must not allocate before its bytes come.
      values_.back().reserve(static_cast<std::size_t>(
          std::min<std::uint64_t>(body_left_, std::max<std::size_t>(data.size() - pos, 1 << 16))));
    }
    const auto take = static_cast<std::size_t>(
        std::min<std::uint64_t>(body_left_, data.size() - pos));
    values_.back().insert(values_.back().end(), data.begin() + pos, data.begin() + pos + take);
    pos += take;
    body_left_ -= take;
    if (body_left_ > 0) break;
    in_body_ = false;
    --values_left_;
  }
  used = pos;
  done_ = values_left_ == 0;
  return done_ ? DecodeStatus::kOk : DecodeStatus::kNeedMore;
}

ByteVec ReplyDecoder::take_value() {
  if (values_.empty()) return {};
  return std::move(values_.front());
}

}  // namespace ddp::rdzv::wire
