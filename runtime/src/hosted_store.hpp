#pragma once
// The store rank 0 hosts when the launcher does not (PyTorch's env:// convention: torchrun with a
// c10d or static rendezvous sets TORCHELASTIC_USE_AGENT_STORE=False and only reserves
// MASTER_PORT; a job started by hand sets nothing). ddprun always sets True: its agent hosts it.

#include <string>

namespace ddp::runtime {

// True when this rank must host the store: rank 0 and TORCHELASTIC_USE_AGENT_STORE is not "True".
bool must_host_store(int rank);

// Starts a TCPStore server (both dialects) on 0.0.0.0:port on a thread of its own; it serves until
// the process exits. Throws IoError naming the port when it cannot be bound.
void host_store(int port);

}  // namespace ddp::runtime
