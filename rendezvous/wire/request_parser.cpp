// RequestParser: a byte-at-a-time-safe state machine. Each field (u8 command, u32 word, u64 count,
// string = u64 length + bytes, i64 delta) is read into a small scratch buffer or straight into the
// request, so a request split anywhere across reads parses the same as one read.

#include "rendezvous/wire/request_parser.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace ddp::rdzv::wire {
namespace {

// Integers travel little-endian (copied from memory on x86 by PyTorch).
std::uint64_t load_le(const std::uint8_t* bytes, std::size_t n) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < n; ++i) value |= std::uint64_t{bytes[i]} << (8 * i);
  return value;
}

constexpr std::size_t kMaxInitialReserve = std::size_t{1} << 20;

constexpr std::uint8_t kValidateByte = *encode_command(Dialect::kTorch2, Command::kValidate);

}  // namespace

RequestParser::RequestParser(Limits limits) : limits_(limits) {}

bool RequestParser::fill_scratch(std::span<const std::uint8_t> data, std::size_t& pos,
                                 std::size_t want) {
  const std::size_t take = std::min(want - scratch_used_, data.size() - pos);
  std::memcpy(scratch_ + scratch_used_, data.data() + pos, take);
  scratch_used_ += take;
  pos += take;
  return scratch_used_ == want;
}

RequestParser::Step RequestParser::next_field_step() const {
  const std::size_t keys = request_.keys.size();
  const std::size_t values = request_.values.size();
  switch (request_.command) {
    case Command::kValidate:
    case Command::kPing:
      return fields_done_ == 0 ? Step::kWord : Step::kDone;
    case Command::kSet:
    case Command::kAppend:
    case Command::kQueuePush:
      return fields_done_ == 0 ? Step::kKeyLength
             : fields_done_ == 1 ? Step::kValueLength
                                 : Step::kDone;
    case Command::kCompareSet:
      return fields_done_ == 0 ? Step::kKeyLength
             : fields_done_ < 3 ? Step::kValueLength
                                : Step::kDone;
    case Command::kGet:
    case Command::kWatchKey:
    case Command::kDeleteKey:
    case Command::kQueuePop:
    case Command::kQueueLen:
      return fields_done_ == 0 ? Step::kKeyLength : Step::kDone;
    case Command::kAdd:
    case Command::kBarrier:
      return fields_done_ == 0 ? Step::kKeyLength
             : fields_done_ == 1 ? Step::kDelta
                                 : Step::kDone;
    case Command::kCheck:
    case Command::kWait:
    case Command::kMultiGet:
      if (fields_done_ == 0) return Step::kCount;
      return keys < count_ ? Step::kKeyLength : Step::kDone;
    case Command::kMultiSet:
      if (fields_done_ == 0) return Step::kCount;
      if (values == count_) return Step::kDone;
      return keys == values ? Step::kKeyLength : Step::kValueLength;
    case Command::kGetNumKeys:
    case Command::kCancelWait:
    case Command::kListKeys:
      return Step::kDone;
  }
  return Step::kDone;
}

void RequestParser::after_field() {
  ++fields_done_;
  scratch_used_ = 0;
  step_ = next_field_step();
}

ParseResult RequestParser::feed(std::span<const std::uint8_t> data) {
  std::size_t pos = 0;
  auto bad = [&](std::string why) {
    error_ = std::move(why);
    step_ = Step::kBad;
    return ParseResult{ParseStatus::kBad, pos};
  };
  if (step_ == Step::kBad) return {ParseStatus::kBad, 0};
  if (step_ == Step::kDone) return {ParseStatus::kOk, 0};

  while (step_ != Step::kDone) {
    if (pos == data.size() && step_ != Step::kKeyBytes && step_ != Step::kValueBytes) {
      return {ParseStatus::kNeedMore, pos};
    }
    switch (step_) {
      case Step::kCommand: {
        const std::uint8_t byte = data[pos++];
        if (!dialect_ && byte == kValidateByte) {
          step_ = Step::kSniff;  // VALIDATE or a 1.13 SET: the next 4 bytes tell
          break;
        }
        if (!dialect_) dialect_ = Dialect::kTorch113;
        const auto command = decode_command(*dialect_, byte);
        if (!command) {
          return bad(fmt::format("unknown command byte 0x{:02x} in the {} dialect", byte,
                                 *dialect_ == Dialect::kTorch113 ? "1.13" : "2.x"));
        }
        request_ = Request{};
        request_.command = *command;
        fields_done_ = 0;
        scratch_used_ = 0;
        step_ = next_field_step();
        break;
      }
      case Step::kSniff: {
        if (!fill_scratch(data, pos, 4)) return {ParseStatus::kNeedMore, pos};
        request_ = Request{};
        fields_done_ = 0;
        if (load_le(scratch_, 4) == kValidateMagic) {
          dialect_ = Dialect::kTorch2;
          request_.command = Command::kValidate;
          request_.word = kValidateMagic;
          fields_done_ = 1;
          scratch_used_ = 0;
          step_ = Step::kDone;
        } else {
          // A 1.13 SET: the 4 bytes are the low half of its key length; keep them.
          dialect_ = Dialect::kTorch113;
          request_.command = Command::kSet;
          step_ = Step::kKeyLength;
        }
        break;
      }
      case Step::kWord: {
        if (!fill_scratch(data, pos, 4)) return {ParseStatus::kNeedMore, pos};
        request_.word = static_cast<std::uint32_t>(load_le(scratch_, 4));
        if (request_.command == Command::kValidate && request_.word != kValidateMagic) {
          return bad(fmt::format("VALIDATE with magic 0x{:08x}, expected 0x{:08x}", request_.word,
                                 kValidateMagic));
        }
        after_field();
        break;
      }
      case Step::kCount: {
        if (!fill_scratch(data, pos, 8)) return {ParseStatus::kNeedMore, pos};
        count_ = load_le(scratch_, 8);
        if (count_ > limits_.max_keys_per_query) {
          return bad(fmt::format("{} keys in one query exceed the limit of {}", count_,
                                 limits_.max_keys_per_query));
        }
        request_.keys.reserve(count_);
        if (request_.command == Command::kMultiSet) request_.values.reserve(count_);
        after_field();
        break;
      }
      case Step::kDelta: {
        if (!fill_scratch(data, pos, 8)) return {ParseStatus::kNeedMore, pos};
        request_.delta = static_cast<std::int64_t>(load_le(scratch_, 8));
        after_field();
        break;
      }
      case Step::kKeyLength:
      case Step::kValueLength: {
        if (!fill_scratch(data, pos, 8)) return {ParseStatus::kNeedMore, pos};
        remaining_ = load_le(scratch_, 8);
        scratch_used_ = 0;
        const bool is_key = step_ == Step::kKeyLength;
        const std::size_t limit = is_key ? limits_.max_key_bytes : limits_.max_value_bytes;
        if (remaining_ > limit) {
          return bad(fmt::format("{} length {} exceeds the limit of {} bytes",
                                 is_key ? "key" : "value", remaining_, limit));
        }
        if (is_key) {
          request_.keys.emplace_back().reserve(remaining_);
          step_ = Step::kKeyBytes;
          break;
        }
        if (admit_value_) {
          // Refused before its bytes are read (and held): e.g. an APPEND past the value limit.
          std::string why = admit_value_(request_, remaining_);
          if (!why.empty()) return bad(std::move(why));
        }
        // Reserve what was announced only up to a bound: the bytes must arrive to be stored.
        request_.values.emplace_back().reserve(
            std::min<std::uint64_t>(remaining_, kMaxInitialReserve));
        step_ = Step::kValueBytes;
        break;
      }
      case Step::kKeyBytes:
      case Step::kValueBytes: {
        const auto bytes =
            data.subspan(pos, std::min<std::uint64_t>(remaining_, data.size() - pos));
        if (step_ == Step::kKeyBytes) {
          request_.keys.back().append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
        } else {
          auto& value = request_.values.back();
          if (value.capacity() - value.size() < bytes.size()) {
            // Past its first MiB the value gets its whole announced length at once (address
            // space; pages are used as bytes arrive): growing by doubling would copy up to half
            // of it in one go, stalling every other connection.
            value.reserve(value.size() + remaining_);
          }
          value.insert(value.end(), bytes.begin(), bytes.end());
        }
        pos += bytes.size();
        remaining_ -= bytes.size();
        if (remaining_ > 0) return {ParseStatus::kNeedMore, pos};
        after_field();
        break;
      }
      case Step::kDone:
      case Step::kBad:
        break;
    }
  }
  return {ParseStatus::kOk, pos};
}

Request RequestParser::take_request() {
  Request request = std::move(request_);
  request_ = Request{};
  step_ = Step::kCommand;
  scratch_used_ = 0;
  fields_done_ = 0;
  count_ = 0;
  return request;
}

}  // namespace ddp::rdzv::wire
