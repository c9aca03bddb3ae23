// GlooProcessGroup's life: creating the TCP device, connecting the full mesh through the group's
// store, and sub-groups (new_group). Which transport each collective takes is chosen in
// gloo_transport_choice.cpp; the operations are in gloo_collectives.cpp and gloo_p2p.cpp.
#include "collectives/gloo/gloo_process_group.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>

#include "collectives/arrival_tracker.hpp"
#include "collectives/gloo/gloo_process_group_shared.hpp"
#include "collectives/gloo/gloo_store_adapter.hpp"
#include "collectives/op_worker.hpp"
#include "collectives/shm/shm_collectives.hpp"
#include "common/check.hpp"
#include "common/log.hpp"
#include "ddp/error.hpp"

namespace ddp::coll {

std::shared_ptr<GlooProcessGroup> GlooProcessGroup::create(
    std::shared_ptr<rdzv::BlockingStore> store, int rank, int size, GlooOptions options,
    std::vector<int> global_ranks) {
  if (size < 1 || rank < 0 || rank >= size) {
    throw ConfigError(fmt::format("gloo group: rank {} is outside a group of size {}", rank, size));
  }
  gloo::transport::tcp::attr attr;
  if (!options.iface.empty()) {
    attr.iface = options.iface;
  } else {
    attr.hostname = options.hostname;
  }
  auto shared = std::make_shared<Shared>();
  try {
    shared->device = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw IoError(fmt::format("gloo device on {} failed: {}",
                              options.iface.empty() ? options.hostname : options.iface, e.what()));
  }
  shared->options = std::move(options);
  std::shared_ptr<GlooProcessGroup> group(
      new GlooProcessGroup(std::move(store), rank, size, std::move(global_ranks), shared));
  group->connect();
  return group;
}

GlooProcessGroup::GlooProcessGroup(std::shared_ptr<rdzv::BlockingStore> store, int rank, int size,
                                   std::vector<int> global_ranks, std::shared_ptr<Shared> shared)
    : store_(std::move(store)),
      rank_(rank),
      size_(size),
      global_ranks_(std::move(global_ranks)),
      shared_(std::move(shared)),
      options_(shared_->options) {
  if (global_ranks_.empty()) {
    for (int r = 0; r < size_; ++r) global_ranks_.push_back(r);
  }
  DDP_CHECK(static_cast<int>(global_ranks_.size()) == size_, "{} global ranks for size {}",
            global_ranks_.size(), size_);
  set_timeout(options_.timeout);
  arrivals_ = std::make_unique<ArrivalTracker>(store_, rank_, size_);
  p2p_waiter_ = std::make_unique<OpWorker>();
  worker_ = std::make_unique<OpWorker>();
}

GlooProcessGroup::~GlooProcessGroup() {
  worker_.reset();  // finish queued collectives while the context still exists
  p2p_waiter_.reset();
}

void GlooProcessGroup::connect() {
  auto context = std::make_shared<gloo::rendezvous::Context>(rank_, size_);
  context->setTimeout(timeout());
  GlooStoreAdapter adapter(store_, timeout());
  try {
    context->connectFullMesh(adapter, shared_->device);
  } catch (const TimeoutError& e) {
    std::vector<int> missing;
    for (int r = 0; r < size_; ++r) {
      if (!store_->check({std::to_string(r)})) missing.push_back(r);
    }
    throw TimeoutError(fmt::format("gloo group of {} ranks: {} did not join within {}ms ({})",
                                   size_, describe_ranks(missing), timeout().count(), e.what()));
  } catch (const gloo::Exception& e) {
    throw IoError(fmt::format("gloo group of {} ranks: connecting rank {} failed: {}", size_,
                              global_ranks_[rank_], e.what()));
  }
  context_ = std::move(context);
  connect_shared_memory();
  log::get("coll")->debug("gloo group connected rank={} size={} all_reduce={} store={}", rank_,
                          size_, to_string(algorithm()), store_->describe());
}

std::string GlooProcessGroup::describe_ranks(const std::vector<int>& group_ranks) const {
  std::vector<int> global;
  for (int r : group_ranks) global.push_back(global_ranks_.at(r));
  return fmt::format("{} [{}]", global.size() == 1 ? "rank" : "ranks", fmt::join(global, ", "));
}

std::shared_ptr<ProcessGroup> GlooProcessGroup::new_group(std::vector<int> ranks) {
  if (ranks.empty() || !std::is_sorted(ranks.begin(), ranks.end()) ||
      std::adjacent_find(ranks.begin(), ranks.end()) != ranks.end()) {
    throw ConfigError(fmt::format("new_group([{}]): ranks must be sorted, unique and non-empty",
                                  fmt::join(ranks, ", ")));
  }
  std::vector<int> parent_index;  // group rank in this group of each listed global rank
  for (int global : ranks) {
    auto it = std::find(global_ranks_.begin(), global_ranks_.end(), global);
    if (it == global_ranks_.end()) {
      throw ConfigError(fmt::format("new_group([{}]): rank {} is not in the parent group",
                                    fmt::join(ranks, ", "), global));
    }
    parent_index.push_back(static_cast<int>(it - global_ranks_.begin()));
  }
  const int number = next_group_++;  // every rank of this group counts every call
  auto self = std::find(ranks.begin(), ranks.end(), global_ranks_[rank_]);
  if (self == ranks.end()) return nullptr;
  auto store = store_->with_prefix(fmt::format("group_{}", number));
  std::shared_ptr<GlooProcessGroup> group(
      new GlooProcessGroup(std::move(store), static_cast<int>(self - ranks.begin()),
                           static_cast<int>(ranks.size()), ranks, shared_));
  group->set_timeout(timeout());
  group->connect();
  {
    std::lock_guard lock(sub_groups_mutex_);
    std::erase_if(sub_groups_, [](const auto& weak) { return weak.expired(); });
    sub_groups_.push_back(group);
  }
  if (is_aborted()) group->abort();  // abort() may have run while it connected
  return group;
}

}  // namespace ddp::coll
