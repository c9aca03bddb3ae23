// libFuzzer target for the server's side of the store handshake (rendezvous/auth). Properties:
// the handshake never consumes more than it was given, kNeedMore consumes everything, feeding in
// input-chosen chunks ends in the same state with the same replies as one piece, only a tag made
// with the job's secret for this challenge (or, on a munge server, a credential its check
// accepts) authenticates, and a refusal always sends 03. The first input byte chooses the chunk
// size and, when odd, puts a right HELLO and tag in front of the rest, so the authenticated path
// is explored too; bit 1 makes the server a munge one (its check, a stand-in for munged, accepts
// exactly the expected payload as the credential, so the fuzzer can also forge an accepted
// credential on its own: what must hold is that a munge server authenticates only after its
// check accepted).

#include "rendezvous/auth/auth_protocol.hpp"
#include "rendezvous/auth/server_handshake.hpp"

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <span>
#include <vector>

namespace {

using ddp::rdzv::auth::ServerHandshake;
using Status = ServerHandshake::Status;

struct Outcome {
  Status status = Status::kNeedMore;
  std::size_t consumed = 0;
  std::vector<std::uint8_t> out;
  bool munged_accepted = false;  // the stand-in check accepted a credential during this run
};

bool stand_in_accepted = false;

const std::vector<std::uint8_t>& challenge() {
  static const std::vector<std::uint8_t> bytes(ddp::rdzv::auth::kChallengeBytes, 0x42);
  return bytes;
}

const std::shared_ptr<const ddp::rdzv::auth::Credentials>& job() {
  static const auto credentials = std::make_shared<const ddp::rdzv::auth::Credentials>(
      ddp::rdzv::auth::Credentials{"fuzz-secret-0123456789", "fuzz-run"});
  return credentials;
}

const std::shared_ptr<const ddp::rdzv::auth::Credentials>& munge_job() {
  static const auto credentials = std::make_shared<const ddp::rdzv::auth::Credentials>(
      ddp::rdzv::auth::Credentials{{}, "fuzz-run", std::string("/nonexistent")});
  return credentials;
}

std::optional<std::string> stand_in_munged(const std::string& credential,
                                           std::string_view payload) {
  if (credential == payload) {
    stand_in_accepted = true;
    return std::nullopt;
  }
  return std::string("not the expected payload");
}

Outcome run(std::span<const std::uint8_t> data, std::size_t chunk, bool with_secret, bool munge) {
  ServerHandshake handshake(with_secret ? (munge ? munge_job() : job()) : nullptr,
                            with_secret ? challenge() : std::vector<std::uint8_t>{});
  Outcome outcome;
  stand_in_accepted = false;
  for (std::size_t at = 0; at < data.size(); at += chunk) {
    const auto piece = data.subspan(at, std::min(chunk, data.size() - at));
    auto result = handshake.feed(piece, outcome.out);
    if (result.consumed > piece.size()) std::abort();
    if (result.status == Status::kCheckMunge) {
      if (!munge || !with_secret) std::abort();
      const auto& query = handshake.munge_query();
      const auto verdict = handshake.finish_munge(stand_in_munged(query.credential, query.payload),
                                                  outcome.out);
      if (verdict.consumed != 0 || verdict.status == Status::kCheckMunge) std::abort();
      result.status = verdict.status;
    }
    outcome.consumed += result.consumed;
    outcome.status = result.status;
    if (result.status == Status::kNeedMore) {
      if (result.consumed != piece.size()) std::abort();
      continue;
    }
    if (result.status == Status::kRefused && outcome.out.back() != 3) std::abort();
    if (result.status == Status::kRefused && handshake.error().empty()) std::abort();
    break;
  }
  outcome.munged_accepted = stand_in_accepted;
  return outcome;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t chunk = 1 + data[0] % 41;
  std::vector<std::uint8_t> input;
  const bool authentic = (data[0] & 1) != 0;
  const bool munge = (data[0] & 2) != 0;
  if (authentic) {
    input = ddp::rdzv::auth::hello_bytes({});
    if (munge) {
      const std::string payload = ddp::rdzv::auth::munge_payload("fuzz-run", challenge());
      input.push_back(static_cast<std::uint8_t>(payload.size() >> 8));
      input.push_back(static_cast<std::uint8_t>(payload.size() & 0xFF));
      input.insert(input.end(), payload.begin(), payload.end());
    } else {
      const auto tag = ddp::rdzv::auth::auth_tag(*job(), challenge());
      input.insert(input.end(), tag.begin(), tag.end());
    }
  }
  input.insert(input.end(), data + 1, data + size);
  for (const bool with_secret : {true, false}) {
    const Outcome whole = run(input, input.size(), with_secret, munge);
    const Outcome pieces = run(input, chunk, with_secret, munge);
    if (whole.status != pieces.status || whole.consumed != pieces.consumed ||
        whole.out != pieces.out) {
      std::abort();
    }
    // Only the right tag (or a credential the munge check accepted) opens a store with a
    // secret; without one, nothing authenticates.
    const bool proven = authentic || (munge && whole.munged_accepted);
    if (whole.status == Status::kAuthenticated && (!with_secret || !proven)) std::abort();
    if (with_secret && authentic && whole.status != Status::kAuthenticated) std::abort();
  }
  return 0;
}
