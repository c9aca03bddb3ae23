// Round-change events. Field names are the event log's contract (docs/agent.md).

#include "agent/core/round_events.hpp"

namespace ddp::agent {

const char* round_change_name(rdzv::RoundChange change) {
  switch (change) {
    case rdzv::RoundChange::kPeerFailed:
      return "peer_failed";
    case rdzv::RoundChange::kNodeLost:
      return "node_lost";
    case rdzv::RoundChange::kNodeWaiting:
      return "node_waiting";
  }
  return "unknown";
}

void emit_node_losses(EventSink& events, const rdzv::RoundEvent& event) {
  for (const rdzv::NodeLoss& loss : event.lost) {
    events.emit(Event("node_lost")
                    .with("node", loss.node)
                    .with("detected_by", loss.detected_by)
                    .with("after_ms", static_cast<std::int64_t>(loss.after.count())));
  }
}

void emit_round_change(EventSink& events, const rdzv::RoundEvent& event) {
  emit_node_losses(events, event);
  events.emit(Event("restart")
                  .with("reason", event.detail)
                  .with("restart_spent", 0)
                  .with("round_change", round_change_name(event.change)));
}

}  // namespace ddp::agent
