#pragma once
// The orphan guard's watchdog loop, shared by the static `ddprun-guard` helper and the fork
// fallback (see orphan_guard.hpp). Only async-signal-safe calls and no allocation, so that it may
// also run in a forked copy of a multi-threaded agent.

#include <cstdint>

namespace ddp::agent::watchdog {

// One SOCK_SEQPACKET record from the agent: start or stop guarding a process group.
struct Record {
  std::int32_t op;
  std::int32_t pgid;
};
constexpr std::int32_t kAdd = 1;
constexpr std::int32_t kRemove = 2;

// Leads its own process group, ignores job-control signals, closes every descriptor but `sock`,
// then tracks process groups from `sock` until EOF (the agent is gone, whatever the cause) and
// SIGKILLs those still tracked. Exits 0.
[[noreturn]] void run(int sock);

}  // namespace ddp::agent::watchdog
