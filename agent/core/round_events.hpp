#pragma once
// The events a round change emits (node_lost per lost node, then restart or reform), shared by
// the restart path of ElasticAgent and the in-process path of InprocessRecovery.

#include "agent/core/event_log.hpp"
#include "rendezvous/rendezvous.hpp"

namespace ddp::agent {

// "peer_failed", "node_lost" or "node_waiting": the round_change field and the reform cause.
const char* round_change_name(rdzv::RoundChange change);

// One node_lost event per node `event` lost (none for other changes).
void emit_node_losses(EventSink& events, const rdzv::RoundEvent& event);

// The round ended because of another node and the workers restart: node_lost per lost node,
// then the restart that spends nothing.
void emit_round_change(EventSink& events, const rdzv::RoundEvent& event);

}  // namespace ddp::agent
