// Which transport a GlooProcessGroup's collectives take: shared memory (every rank on this host),
// hierarchical (shared memory within hosts, Gloo among hosts' leaders) or Gloo's ring/bcube over
// TCP, from the algorithm setting and what the ranks find when they try shared memory.
#include <gloo/transport/device.h>

#include "collectives/gloo/gloo_process_group.hpp"
#include "collectives/gloo/gloo_process_group_shared.hpp"
#include "collectives/shm/shm_collectives.hpp"
#include "common/log.hpp"
#include "ddp/error.hpp"

namespace ddp::coll {

void GlooProcessGroup::connect_shared_memory() {
  const auto requested = options_.algorithm;
  if (size_ == 1 ||
      (requested != AllreduceAlgorithm::kAuto && requested != AllreduceAlgorithm::kShm)) {
    return;
  }
  shm::ShmCollectives::Refusal refusal;
  shm_ = shm::ShmCollectives::connect(*store_->with_prefix("shm"), rank_, size_, global_ranks_,
                                      timeout(), refusal, domain());
  if (shm_) return;
  if (requested == AllreduceAlgorithm::kShm) {
    throw ConfigError(fmt::format("all_reduce algorithm shm cannot be used: {}", refusal.reason));
  }
  if (refusal.elsewhere) {  // the same on every rank, so all of them take this branch or none
    connect_hierarchical(refusal.domains);
    if (!hierarchical_) log::get("coll")->debug("all_reduce over TCP (ring): {}", refusal.reason);
  } else if (rank_ == 0) {  // ranks share a host but not memory: a slower path, say it once
    log::get("coll")->warn("all_reduce falls back to TCP (ring), slower than shared memory: {}",
                           refusal.reason);
  }
}

AllreduceAlgorithm GlooProcessGroup::algorithm() const {
  if (options_.algorithm != AllreduceAlgorithm::kAuto) return options_.algorithm;
  if (shm_) return AllreduceAlgorithm::kShm;
  return hierarchical_ ? AllreduceAlgorithm::kHierarchical : AllreduceAlgorithm::kRing;
}

std::shared_ptr<gloo::transport::Device> GlooProcessGroup::device() const {
  return shared_->device;
}

std::string GlooProcessGroup::domain() const {
  return options_.shm_domain.empty() ? shm::shared_memory_domain() : options_.shm_domain;
}

const char* GlooProcessGroup::transport_name() const {
  if (shm_) return "shared memory";
  return hierarchical_ ? "shared memory and gloo" : "gloo";
}

}  // namespace ddp::coll
