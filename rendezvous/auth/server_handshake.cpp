// The server never tells a refused peer more than one byte: whether its HELLO was malformed, its
// tag wrong or its munge credential refused goes to the server's log, not to the peer. The tag
// the peer must send is computed only once its 32 bytes are there, and compared in constant time.
// Every field has a fixed or bounded length, so a peer cannot make the server hold more than
// kMaxMungeCredentialBytes of handshake.

#include "rendezvous/auth/server_handshake.hpp"

#include <algorithm>
#include <cassert>

#include <fmt/format.h>

namespace ddp::rdzv::auth {

namespace ip = boost::asio::ip;

ServerHandshake::ServerHandshake(std::shared_ptr<const Credentials> credentials,
                                 std::vector<std::uint8_t> challenge)
    : credentials_(std::move(credentials)), challenge_(std::move(challenge)) {
  assert(!credentials_ || challenge_.size() == kChallengeBytes);
}

bool ServerHandshake::gather(std::span<const std::uint8_t> data, std::size_t& pos,
                             std::size_t want) {
  const std::size_t take = std::min(want - got_.size(), data.size() - pos);
  got_.insert(got_.end(), data.begin() + static_cast<std::ptrdiff_t>(pos),
              data.begin() + static_cast<std::ptrdiff_t>(pos + take));
  pos += take;
  return got_.size() == want;
}

ServerHandshake::Result ServerHandshake::refuse(std::string why, std::size_t consumed,
                                                std::vector<std::uint8_t>& out) {
  step_ = Step::kDone;
  error_ = std::move(why);
  out.push_back(static_cast<std::uint8_t>(Verdict::kRefused));
  return {Status::kRefused, consumed};
}

ServerHandshake::Result ServerHandshake::accept(std::size_t consumed,
                                                std::vector<std::uint8_t>& out) {
  step_ = Step::kDone;
  out.push_back(static_cast<std::uint8_t>(Verdict::kAccepted));
  return {Status::kAuthenticated, consumed};
}

bool ServerHandshake::read_addresses(std::span<const std::uint8_t> data, std::size_t& pos) {
  for (;;) {
    if (step_ == Step::kCount) {
      if (!gather(data, pos, 1)) return false;
      addresses_left_ = got_[0];
      got_.clear();
      step_ = Step::kAddressLength;
      if (addresses_left_ > kMaxReportedAddresses) return true;  // refused by the caller
    }
    if (addresses_left_ == 0) return true;
    if (step_ == Step::kAddressLength) {
      if (!gather(data, pos, 1)) return false;
      field_bytes_ = got_[0];
      got_.clear();
      if (field_bytes_ != 4 && field_bytes_ != 16) return true;  // refused by the caller
      step_ = Step::kAddress;
    }
    if (!gather(data, pos, field_bytes_)) return false;
    if (field_bytes_ == 4) {
      ip::address_v4::bytes_type bytes;
      std::copy(got_.begin(), got_.end(), bytes.begin());
      reported_.emplace_back(ip::address_v4(bytes));
    } else {
      ip::address_v6::bytes_type bytes;
      std::copy(got_.begin(), got_.end(), bytes.begin());
      reported_.emplace_back(ip::address_v6(bytes));
    }
    got_.clear();
    --addresses_left_;
    step_ = Step::kAddressLength;
  }
}

std::optional<ServerHandshake::Result> ServerHandshake::answer_hello(
    std::size_t pos, std::vector<std::uint8_t>& out) {
  if (addresses_left_ > kMaxReportedAddresses ||
      (addresses_left_ > 0 && field_bytes_ != 4 && field_bytes_ != 16)) {
    return refuse("a malformed handshake (a bad address list after HELLO)", pos, out);
  }
  if (!credentials_) {
    step_ = Step::kDone;
    out.push_back(static_cast<std::uint8_t>(Verdict::kNotRequired));
    return Result{Status::kPlain, pos};
  }
  const bool munge = credentials_->uses_munge();
  out.push_back(static_cast<std::uint8_t>(munge ? Verdict::kMungeChallenge : Verdict::kChallenge));
  out.insert(out.end(), challenge_.begin(), challenge_.end());
  step_ = munge ? Step::kMungeLength : Step::kTag;
  return std::nullopt;
}

ServerHandshake::Result ServerHandshake::finish_munge(const std::optional<std::string>& refusal,
                                                      std::vector<std::uint8_t>& out) {
  assert(step_ == Step::kMungeCheck);
  if (refusal) return refuse(*refusal, 0, out);
  return accept(0, out);
}

ServerHandshake::Result ServerHandshake::feed(std::span<const std::uint8_t> data,
                                              std::vector<std::uint8_t>& out) {
  assert(step_ != Step::kDone && step_ != Step::kMungeCheck);
  std::size_t pos = 0;
  if (step_ == Step::kFirst) {
    if (data.empty()) return {Status::kNeedMore, 0};
    if (!starts_like_hello(data)) {
      step_ = Step::kDone;  // a TCPStore client: 1.13 and 2.x requests start with 0x00..0x12
      return {Status::kPlain, 0};
    }
    step_ = Step::kHello;
  }
  if (step_ == Step::kHello) {
    if (!gather(data, pos, kHello.size())) return {Status::kNeedMore, pos};
    if (!std::equal(got_.begin(), got_.end(), kHello.begin())) {
      return refuse("a malformed handshake (not ddprun's HELLO, or another version)", pos, out);
    }
    got_.clear();
    step_ = Step::kCount;
  }
  if (step_ == Step::kCount || step_ == Step::kAddressLength || step_ == Step::kAddress) {
    if (!read_addresses(data, pos)) return {Status::kNeedMore, pos};
    if (auto done = answer_hello(pos, out)) return *done;
  }
  if (step_ == Step::kTag) {
    if (!gather(data, pos, kTagBytes)) return {Status::kNeedMore, pos};
    if (!equal_in_constant_time(got_, auth_tag(*credentials_, challenge_))) {
      return refuse("a wrong handshake tag (not this job's secret or run id, or a replay)", pos,
                    out);
    }
    return accept(pos, out);
  }
  if (step_ == Step::kMungeLength) {
    if (!gather(data, pos, 2)) return {Status::kNeedMore, pos};
    field_bytes_ = (std::size_t{got_[0]} << 8) | got_[1];
    got_.clear();
    if (field_bytes_ == 0 || field_bytes_ > kMaxMungeCredentialBytes) {
      return refuse(fmt::format("a malformed handshake (a munge credential of {} bytes)",
                                field_bytes_),
                    pos, out);
    }
    step_ = Step::kMungeCredential;
  }
  if (!gather(data, pos, field_bytes_)) return {Status::kNeedMore, pos};
  munge_query_.credential.assign(got_.begin(), got_.end());
  munge_query_.payload = munge_payload(credentials_->run_id, challenge_);
  step_ = Step::kMungeCheck;
  return {Status::kCheckMunge, pos};
}

}  // namespace ddp::rdzv::auth
