// Request encoding and incremental reply decoding for the TCPStore client. Integers go out
// little-endian byte by byte (PyTorch copies host memory, which is little-endian on every
// platform it ships for), so the bytes are the same on any host.
#include "rendezvous/wire/client_codec.hpp"

#include <algorithm>

#include "common/check.hpp"

namespace ddp::rdzv::wire {
namespace {

void put_le(ByteVec& out, std::uint64_t value, std::size_t width) {
  for (std::size_t i = 0; i < width; ++i) {
    out.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
  }
}

void put_bytes(ByteVec& out, const void* data, std::size_t size) {
  put_le(out, size, kLengthBytes);
  const auto* p = static_cast<const std::uint8_t*>(data);
  out.insert(out.end(), p, p + size);
}

void put_string(ByteVec& out, std::string_view s) { put_bytes(out, s.data(), s.size()); }
void put_value(ByteVec& out, ByteSpan v) { put_bytes(out, v.data(), v.size()); }

void put_keys(ByteVec& out, const std::vector<std::string>& keys) {
  put_le(out, keys.size(), kLengthBytes);
  for (const auto& key : keys) put_string(out, key);
}

}  // namespace

void RequestEncoder::command(ByteVec& out, Command command) const {
  auto byte = encode_command(dialect_, command);
  DDP_CHECK(byte.has_value(), "command {} has no byte in this dialect",
            static_cast<int>(command));
  out.push_back(*byte);
}

void RequestEncoder::validate(ByteVec& out) const {
  command(out, Command::kValidate);
  put_le(out, kValidateMagic, 4);
}

void RequestEncoder::ping(ByteVec& out, std::uint32_t nonce) const {
  command(out, Command::kPing);
  put_le(out, nonce, 4);
}

void RequestEncoder::set(ByteVec& out, std::string_view key, ByteSpan value) const {
  command(out, Command::kSet);
  put_string(out, key);
  put_value(out, value);
}

void RequestEncoder::compare_set(ByteVec& out, std::string_view key, ByteSpan expected,
                                 ByteSpan desired) const {
  command(out, Command::kCompareSet);
  put_string(out, key);
  put_value(out, expected);
  put_value(out, desired);
}

void RequestEncoder::get(ByteVec& out, std::string_view key) const {
  command(out, Command::kGet);
  put_string(out, key);
}

void RequestEncoder::add(ByteVec& out, std::string_view key, std::int64_t delta) const {
  command(out, Command::kAdd);
  put_string(out, key);
  put_le(out, static_cast<std::uint64_t>(delta), 8);
}

void RequestEncoder::check(ByteVec& out, const std::vector<std::string>& keys) const {
  command(out, Command::kCheck);
  put_keys(out, keys);
}

void RequestEncoder::wait(ByteVec& out, const std::vector<std::string>& keys) const {
  command(out, Command::kWait);
  put_keys(out, keys);
}

void RequestEncoder::get_num_keys(ByteVec& out) const { command(out, Command::kGetNumKeys); }

void RequestEncoder::delete_key(ByteVec& out, std::string_view key) const {
  command(out, Command::kDeleteKey);
  put_string(out, key);
}

void RequestEncoder::append(ByteVec& out, std::string_view key, ByteSpan value) const {
  command(out, Command::kAppend);
  put_string(out, key);
  put_value(out, value);
}

void RequestEncoder::multi_get(ByteVec& out, const std::vector<std::string>& keys) const {
  command(out, Command::kMultiGet);
  put_keys(out, keys);
}

void RequestEncoder::multi_set(ByteVec& out,
                               const std::vector<std::pair<std::string, ByteVec>>& kvs) const {
  command(out, Command::kMultiSet);
  put_le(out, kvs.size(), kLengthBytes);
  for (const auto& [key, value] : kvs) {
    put_string(out, key);
    put_value(out, value);
  }
}

void RequestEncoder::cancel_wait(ByteVec& out) const { command(out, Command::kCancelWait); }

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
