#pragma once
// Which TCPStore wire dialect a worker speaks to MASTER_ADDR:MASTER_PORT: $DDP_STORE_DIALECT,
// "torch113" (default: understood by ddprun's store and by PyTorch 1.13's torchrun) or "torch2"
// (for a torchrun of PyTorch 2.x).

#include "rendezvous/store_client/connect_options.hpp"

namespace ddp::runtime {

// Throws ConfigError naming DDP_STORE_DIALECT for an unknown value.
rdzv::WireDialect store_dialect_from_env();

}  // namespace ddp::runtime
