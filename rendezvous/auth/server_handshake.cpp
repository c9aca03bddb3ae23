// The server never tells a refused peer more than one byte: whether its HELLO was malformed or
// its tag wrong goes to the server's log, not to the peer. The tag the peer must send is computed
// only once its 32 bytes are there, and compared in constant time.

#include "rendezvous/auth/server_handshake.hpp"

#include <algorithm>
#include <cassert>

namespace ddp::rdzv::auth {

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

ServerHandshake::Result ServerHandshake::feed(std::span<const std::uint8_t> data,
                                              std::vector<std::uint8_t>& out) {
  assert(step_ != Step::kDone);
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
    if (!credentials_) {
      step_ = Step::kDone;
      out.push_back(static_cast<std::uint8_t>(Verdict::kNotRequired));
      return {Status::kPlain, pos};
    }
    out.push_back(static_cast<std::uint8_t>(Verdict::kChallenge));
    out.insert(out.end(), challenge_.begin(), challenge_.end());
    step_ = Step::kTag;
  }
  if (!gather(data, pos, kTagBytes)) return {Status::kNeedMore, pos};
  const Tag expected = auth_tag(*credentials_, challenge_);
  if (!equal_in_constant_time(got_, expected)) {
    return refuse("a wrong handshake tag (not this job's secret or run id, or a replay)", pos,
                  out);
  }
  step_ = Step::kDone;
  out.push_back(static_cast<std::uint8_t>(Verdict::kAccepted));
  return {Status::kAuthenticated, pos};
}

}  // namespace ddp::rdzv::auth
