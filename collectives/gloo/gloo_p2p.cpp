// GlooProcessGroup's send and recv: posted at once on the caller's thread (so a send and a recv in
// either order cannot deadlock) and waited for on the p2p thread. They use their own slot range,
// keyed by the user's tag, apart from the collectives' slots.
#include <fmt/format.h>
#include <gloo/common/error.h>
#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include "collectives/gloo/gloo_failure.hpp"
#include "collectives/gloo/gloo_process_group.hpp"
#include "collectives/op_worker.hpp"
#include "ddp/error.hpp"

namespace ddp::coll {
namespace {

// Slot prefix for send/recv, above the prefixes Gloo's collectives use (gloo/common/utils Slot).
constexpr std::uint64_t kP2PSlotBase = std::uint64_t{0xd0} << 56;

}  // namespace

void GlooProcessGroup::check_peer(const char* name, int peer) const {
  if (peer < 0 || peer >= size_ || peer == rank_) {
    throw ConfigError(
        fmt::format("gloo {}: peer {} is not another rank of this group of {}", name, peer, size_));
  }
}

std::shared_ptr<Work> GlooProcessGroup::send(Tensor t, int dst, int tag) {
  return post_p2p(true, t, dst, tag);
}

std::shared_ptr<Work> GlooProcessGroup::recv(Tensor t, int src, int tag) {
  return post_p2p(false, t, src, tag);
}

std::shared_ptr<Work> GlooProcessGroup::post_p2p(bool sending, Tensor t, int peer, int tag) {
  const char* name = sending ? "send" : "recv";
  check_tensor(name, t);
  check_peer(name, peer);
  throw_if_broken(name, 0);
  const std::string operation = fmt::format("gloo {} {} {} (tag {})", name, sending ? "to" : "from",
                                            describe_ranks({peer}), tag);
  std::shared_ptr<gloo::transport::UnboundBuffer> buffer =
      context_->createUnboundBuffer(t.data, t.bytes());
  const std::uint64_t slot = kP2PSlotBase | static_cast<std::uint32_t>(tag);
  try {  // a pair that failed (or was aborted) since the check throws its exception here
    if (sending) {
      buffer->send(peer, slot);
    } else {
      buffer->recv(peer, slot);
    }
  } catch (const gloo::Exception& e) {
    throw IoError(fmt::format("{} failed: {}", operation, e.what()));
  }
  const auto timeout_ms = timeout();
  return p2p_waiter_->submit([buffer, timeout_ms, operation, sending] {
    try {
      if (sending) {
        buffer->waitSend(timeout_ms);
      } else {
        buffer->waitRecv(timeout_ms);
      }
    } catch (const gloo::Exception& e) {
      throw_gloo_failure(e, fmt::format("{} failed: {}", operation, e.what()));
    }
  });
}

}  // namespace ddp::coll
