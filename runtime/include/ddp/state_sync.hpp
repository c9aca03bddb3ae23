#pragma once
// State sync after an in-process re-form: every rank tells how many commits its training state
// has seen, and the rank with the most sends its state to all the others. A survivor holds its
// last commit; a new process (a joining node, a restarted worker) holds 0 and receives.

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "ddp/process_group.hpp"

namespace ddp {

// Runs `op` on a few host values and waits for it; for a group whose collectives need device
// memory (NCCL), through a device copy (ddp-train's Engine::exchange). Empty: `op` on the host
// tensor itself.
using HostExchange =
    std::function<void(Tensor host, const std::function<std::shared_ptr<Work>(Tensor)>& op)>;

struct SyncResult {
  int root = 0;              // the rank whose state every rank holds now
  std::int64_t commits = 0;  // that rank's commit count
};

// The lowest rank holding the most commits. REQUIRES: counts not empty.
int most_committed_rank(const std::vector<std::int64_t>& counts);

// Collective over every rank of `group`: all-gathers `commits`, then broadcasts every tensor of
// `state` in place from most_committed_rank(). Every rank passes tensors of the same sizes and
// types, in the same order. Throws IoError / TimeoutError from the group (a peer lost meanwhile:
// the caller restores its commit and re-forms again).
SyncResult sync_state(ProcessGroup& group, std::int64_t commits, const std::vector<Tensor>& state,
                      const HostExchange& exchange = nullptr);

}  // namespace ddp
