#pragma once
// HangPeers: what the hang detectors of a multi-node job tell each other through the store, so
// that a rank is named even when the ranks that wait for it run on other nodes. A node whose
// ranks have waited --hang_timeout in a collective publishes the highest such collective (one key
// per round, raised, never lowered); a node with a rank idle that long reads it. Nothing is
// written or read while every rank progresses. Runs on the agent's io_context.

#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ddp::agent {

// Ranks that have waited at least the hang timeout in collective `seq`.
struct PeerWait {
  std::uint64_t seq = 0;
  std::string op;
  std::vector<int> ranks;
  int node = 0;
  double waited_s = 0;

  std::string encode() const;
  static std::optional<PeerWait> decode(const std::string& text);
};

class HangPeers {
 public:
  virtual ~HangPeers() = default;
  // Raises the round's published wait to `wait` unless a higher one is already there.
  virtual boost::asio::awaitable<void> publish(PeerWait wait) = 0;
  // The round's published wait, if any.
  virtual boost::asio::awaitable<std::optional<PeerWait>> read() = 0;
  // Closes the store connection (before the io_context goes: the agent's destructor). Calls
  // still in flight then fail, which reads as "nothing published".
  virtual void close() = 0;
};

// HangPeers over the job's store at addr:port, key "/ddprun/<run_id>/hang/<round>/wait". Store
// failures are logged at debug and read as "nothing published": the detector then judges its own
// node alone. A call takes milliseconds (at most 5 s when the store is unreachable); cancelling
// the detector waits for the one in flight.
std::shared_ptr<HangPeers> make_store_hang_peers(std::string addr, std::uint16_t port,
                                                 std::string run_id, int round);

}  // namespace ddp::agent
