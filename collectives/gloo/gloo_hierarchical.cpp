// GlooProcessGroup's hierarchical all_reduce, for groups that span hosts with several ranks on a
// host: the data crosses the network once per host instead of once per rank. Set-up is collective
// over the whole group: every rank learns every rank's host (the shared-memory domains the shm
// set-up exchanged), the ranks of each host connect their shared memory, all ranks agree in one
// store round that every host managed (else all keep Gloo's ring), and the leaders (each host's
// lowest rank) connect a Gloo context of their own.
#include <fmt/format.h>
#include <gloo/allreduce.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>

#include <algorithm>
#include <chrono>

#include "collectives/gloo/element_type.hpp"
#include "collectives/gloo/gloo_process_group.hpp"
#include "collectives/gloo/gloo_store_adapter.hpp"
#include "collectives/reduce_functions.hpp"
#include "collectives/shm/shm_collectives.hpp"
#include "common/log.hpp"
#include "ddp/error.hpp"

namespace ddp::coll {
namespace {

rdzv::Bytes bytes_of(const std::string& s) { return rdzv::Bytes(s.begin(), s.end()); }

int index_of(const std::vector<int>& ranks, int rank) {
  return static_cast<int>(std::find(ranks.begin(), ranks.end(), rank) - ranks.begin());
}

}  // namespace

void GlooProcessGroup::connect_hierarchical(const std::vector<std::string>& domains) {
  const std::string& mine = domains.at(static_cast<std::size_t>(rank_));
  std::vector<int> host_ranks;  // group ranks on this host, ascending
  std::vector<int> leaders;     // each host's lowest group rank, ascending
  for (int r = 0; r < size_; ++r) {
    if (domains[r] == mine) host_ranks.push_back(r);
    if (std::find(domains.begin(), domains.begin() + r, domains[r]) == domains.begin() + r) {
      leaders.push_back(r);
    }
  }
  if (leaders.size() == static_cast<std::size_t>(size_)) return;  // one rank a host: the ring
  const int leader = host_ranks.front();

  std::string problem;
  if (host_ranks.size() > 1) {
    std::vector<int> host_global;
    for (int r : host_ranks) host_global.push_back(global_ranks_[r]);
    shm::ShmCollectives::Refusal refusal;
    host_shm_ = shm::ShmCollectives::connect(
        *store_->with_prefix(fmt::format("shm_host{}", leader)), index_of(host_ranks, rank_),
        static_cast<int>(host_ranks.size()), host_global, timeout(), refusal, mine);
    if (!host_shm_) problem = refusal.reason;
  }
  store_->set(fmt::format("hierarchical/{}", rank_), bytes_of(problem.empty() ? "ok" : problem));
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    const rdzv::Bytes answer = store_->get(fmt::format("hierarchical/{}", r), timeout());
    if (problem.empty() && std::string(answer.begin(), answer.end()) != "ok") {
      problem = std::string(answer.begin(), answer.end());
    }
  }
  if (!problem.empty()) {
    host_shm_.reset();
    if (rank_ == 0) {
      log::get("coll")->warn(
          "all_reduce across hosts goes over TCP between every rank (ring), "
          "not through shared memory within each host: {}",
          problem);
    }
    return;
  }

  if (rank_ == leader) {
    auto context = std::make_shared<gloo::rendezvous::Context>(index_of(leaders, rank_),
                                                               static_cast<int>(leaders.size()));
    context->setTimeout(timeout());
    GlooStoreAdapter adapter(store_->with_prefix("leaders"), timeout());
    auto gloo_device = device();
    try {
      context->connectFullMesh(adapter, gloo_device);
    } catch (const gloo::Exception& e) {
      throw IoError(
          fmt::format("gloo group of {} ranks: connecting the leaders of {} hosts "
                      "failed on rank {}: {}",
                      size_, leaders.size(), global_ranks_[rank_], e.what()));
    }
    leaders_ = std::move(context);
  }
  hierarchical_ = true;
}

void GlooProcessGroup::hierarchical_all_reduce(const Tensor& t, ReduceOp op, std::uint32_t tag,
                                               std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const ReduceFn reduce = reduce_function(t.dtype, op);
  if (host_shm_) host_shm_->all_reduce(t, reduce, deadline);
  if (leaders_) {  // only leaders: the hosts' results, over TCP
    gloo::AllreduceOptions opts(leaders_);
    with_element_type(t.dtype,
                      [&]<class T>() { opts.setOutput(static_cast<T*>(t.data), t.count); });
    opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    opts.setReduceFunction(reduce);
    opts.setTag(tag);
    opts.setTimeout(std::max(std::chrono::milliseconds(1),
                             std::chrono::duration_cast<std::chrono::milliseconds>(
                                 deadline - std::chrono::steady_clock::now())));
    gloo::allreduce(opts);
  }
  if (host_shm_) host_shm_->broadcast(t, 0, deadline);  // host rank 0 is the leader
}

}  // namespace ddp::coll
