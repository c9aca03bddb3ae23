#pragma once
// The failure verdict (Rendezvous::failure_verdict), once for every backend: after this node's
// workers failed, whether the failure follows from another node (a lost node, or another node's
// failure that spent the round's restart) or is this node's own. Reads the round's RoundMonitor;
// how long to wait is the backend's (how long it takes to find a lost node). Runs on the agent's
// io_context.

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <optional>

#include "rendezvous/engine/round_monitor.hpp"
#include "rendezvous/rendezvous.hpp"

namespace ddp::rdzv {

// The cause outside this node as soon as the round's changes show one; nullopt when every member
// answered a roll call (monitor.all_present: none was lost), the monitor stopped or failed, or
// `until` passed with no cause. Looks at the round at once, then at least every `poll`.
asio::awaitable<std::optional<RoundEvent>> judge_failure(RoundMonitor& monitor,
                                                         std::chrono::steady_clock::time_point until,
                                                         std::chrono::milliseconds poll);

}  // namespace ddp::rdzv
