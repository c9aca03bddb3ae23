// GlooProcessGroup. Tags: collective number `seq` (the same on every rank, since ranks issue
// collectives in the same order) is the Gloo tag, so two collectives never share a slot; p2p
// uses its own slot range keyed by the user's tag.
#include "collectives/gloo/gloo_process_group.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <cstring>

#include "collectives/arrival_tracker.hpp"
#include "collectives/gloo/element_type.hpp"
#include "collectives/gloo/gloo_store_adapter.hpp"
#include "collectives/op_worker.hpp"
#include "collectives/reduce_functions.hpp"
#include "collectives/shm/shm_collectives.hpp"
#include "common/check.hpp"
#include "common/log.hpp"
#include "ddp/error.hpp"

namespace ddp::coll {
namespace {

// Slot prefix for send/recv, above the prefixes Gloo's collectives use (gloo/common/utils Slot).
constexpr std::uint64_t kP2PSlotBase = std::uint64_t{0xd0} << 56;
// How long a failed rank waits for its peers' arrival marks before naming the missing ones.
constexpr std::chrono::milliseconds kArrivalGrace{2000};

gloo::AllreduceOptions::Algorithm gloo_algorithm(AllreduceAlgorithm a) {
  return a == AllreduceAlgorithm::kBcube ? gloo::AllreduceOptions::Algorithm::BCUBE
                                         : gloo::AllreduceOptions::Algorithm::RING;
}

bool is_timeout_message(const std::string& what) {
  return what.find("Timed out") != std::string::npos || what.find("timed out") != std::string::npos;
}

}  // namespace

AllreduceAlgorithm parse_allreduce_algorithm(const std::string& text, const std::string& origin) {
  if (text == "auto") return AllreduceAlgorithm::kAuto;
  if (text == "ring") return AllreduceAlgorithm::kRing;
  if (text == "bcube") return AllreduceAlgorithm::kBcube;
  if (text == "shm") return AllreduceAlgorithm::kShm;
  throw ConfigError(
      fmt::format("{}='{}' is not an all_reduce algorithm (auto, ring, bcube, shm)", origin, text));
}

std::string to_string(AllreduceAlgorithm algorithm) {
  switch (algorithm) {
    case AllreduceAlgorithm::kAuto:
      return "auto";
    case AllreduceAlgorithm::kRing:
      return "ring";
    case AllreduceAlgorithm::kBcube:
      return "bcube";
    case AllreduceAlgorithm::kShm:
      return "shm";
    case AllreduceAlgorithm::kHierarchical:
      return "hierarchical";
  }
  return "?";
}

struct GlooProcessGroup::Shared {
  std::shared_ptr<gloo::transport::Device> device;
  GlooOptions options;
};

std::shared_ptr<GlooProcessGroup> GlooProcessGroup::create(std::shared_ptr<GroupStore> store,
                                                           int rank, int size, GlooOptions options,
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

GlooProcessGroup::GlooProcessGroup(std::shared_ptr<GroupStore> store, int rank, int size,
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
      if (!store_->check(std::to_string(r))) missing.push_back(r);
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

void GlooProcessGroup::connect_shared_memory() {
  const auto requested = options_.algorithm;
  if (size_ == 1 ||
      (requested != AllreduceAlgorithm::kAuto && requested != AllreduceAlgorithm::kShm)) {
    return;
  }
  shm::ShmCollectives::Refusal refusal;
  shm_ = shm::ShmCollectives::connect(*store_->with_prefix("shm/"), rank_, size_, global_ranks_,
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

void GlooProcessGroup::reduce_in_place(const Tensor& t, ReduceOp op, std::uint32_t tag,
                                       std::chrono::milliseconds timeout) {
  if (size_ == 1 || t.count == 0) return;
  if (shm_) {  // divides within its pass over each share
    shm_->all_reduce(t, reduce_function(t.dtype, op), std::chrono::steady_clock::now() + timeout,
                     op == ReduceOp::kAvg ? size_ : 1);
    return;
  }
  if (hierarchical_) {
    hierarchical_all_reduce(t, op, tag, timeout);
  } else {
    gloo::AllreduceOptions opts(context_);
    with_element_type(t.dtype,
                      [&]<class T>() { opts.setOutput(static_cast<T*>(t.data), t.count); });
    opts.setAlgorithm(gloo_algorithm(algorithm()));
    opts.setReduceFunction(reduce_function(t.dtype, op));
    opts.setTag(tag);
    opts.setTimeout(timeout);
    gloo::allreduce(opts);
  }
  if (op == ReduceOp::kAvg) divide_by_count(t, size_);
}

std::string GlooProcessGroup::describe_ranks(const std::vector<int>& group_ranks) const {
  std::vector<int> global;
  for (int r : group_ranks) global.push_back(global_ranks_.at(r));
  return fmt::format("{} [{}]", global.size() == 1 ? "rank" : "ranks", fmt::join(global, ", "));
}

void GlooProcessGroup::check_tensor(const char* name, const Tensor& t) const {
  if (t.device != DeviceKind::kCpu) {
    throw ConfigError(
        fmt::format("gloo {}: tensor is on a CUDA device; the gloo backend takes "
                    "CPU tensors (use DDP_BACKEND=nccl)",
                    name));
  }
  if (t.data == nullptr && t.count > 0) {
    throw ConfigError(fmt::format("gloo {}: tensor of {} elements has no data", name, t.count));
  }
}

void GlooProcessGroup::check_peer(const char* name, int peer) const {
  if (peer < 0 || peer >= size_ || peer == rank_) {
    throw ConfigError(
        fmt::format("gloo {}: peer {} is not another rank of this group of {}", name, peer, size_));
  }
}

std::shared_ptr<Work> GlooProcessGroup::submit_collective(const char* name,
                                                          std::function<void(std::uint32_t)> body) {
  const std::uint64_t seq = ++next_seq_;
  return worker_->submit([this, name, seq, body = std::move(body)] {
    {
      std::lock_guard lock(broken_mutex_);
      if (!broken_.empty()) {
        throw IoError(fmt::format("gloo {} #{}: the group is unusable after an earlier failure: {}",
                                  name, seq, broken_));
      }
    }
    arrivals_->arrive(seq);
    try {
      body(static_cast<std::uint32_t>(seq));
    } catch (const ddp::Error&) {
      throw;
    } catch (const std::exception& e) {  // gloo::Exception, gloo::EnforceNotMet
      fail_collective(name, seq, e);
    }
  });
}

void GlooProcessGroup::fail_collective(const char* name, std::uint64_t seq,
                                       const std::exception& e) {
  const std::string what = e.what();
  const bool timed_out = is_timeout_message(what);
  const auto missing = arrivals_->missing_ranks(seq, std::min(timeout(), kArrivalGrace));
  std::string message;
  if (!missing.empty()) {
    message = fmt::format(
        "gloo {} #{} {}: {} of {} never arrived (rank {}; {}: {})", name, seq,
        timed_out ? fmt::format("timed out after {}ms", timeout().count()) : std::string("failed"),
        describe_ranks(missing), size_, global_ranks_[rank_], transport_name(), what);
  } else {
    message = fmt::format("gloo {} #{} {} on rank {}: {}", name, seq,
                          timed_out ? "timed out" : "failed", global_ranks_[rank_], what);
  }
  {
    std::lock_guard lock(broken_mutex_);
    if (broken_.empty()) broken_ = message;
  }
  log::get("coll")->error("{}", message);
  if (timed_out) throw TimeoutError(message);
  throw IoError(message);
}

std::shared_ptr<Work> GlooProcessGroup::all_reduce(Tensor t, ReduceOp op) {
  check_tensor("all_reduce", t);
  const auto timeout_ms = timeout();
  return submit_collective("all_reduce", [this, t, op, timeout_ms](std::uint32_t tag) {
    reduce_in_place(t, op, tag, timeout_ms);
  });
}

std::shared_ptr<Work> GlooProcessGroup::broadcast(Tensor t, int root) {
  check_tensor("broadcast", t);
  if (root < 0 || root >= size_) {
    throw ConfigError(
        fmt::format("gloo broadcast: root {} is outside the group of {}", root, size_));
  }
  const auto timeout_ms = timeout();
  return submit_collective("broadcast", [this, t, root, timeout_ms](std::uint32_t tag) {
    if (size_ == 1 || t.count == 0) return;
    if (shm_) {
      shm_->broadcast(t, root, std::chrono::steady_clock::now() + timeout_ms);
      return;
    }
    gloo::BroadcastOptions opts(context_);
    with_element_type(t.dtype,
                      [&]<class T>() { opts.setOutput(static_cast<T*>(t.data), t.count); });
    opts.setRoot(root);
    opts.setTag(tag);
    opts.setTimeout(timeout_ms);
    gloo::broadcast(opts);
  });
}

std::shared_ptr<Work> GlooProcessGroup::all_gather(Tensor in, Tensor out) {
  check_tensor("all_gather", in);
  check_tensor("all_gather", out);
  if (in.dtype != out.dtype || out.count != in.count * static_cast<std::size_t>(size_)) {
    throw ConfigError(fmt::format(
        "gloo all_gather: output must hold size() x input = {} elements of the same dtype, not {}",
        in.count * static_cast<std::size_t>(size_), out.count));
  }
  const auto timeout_ms = timeout();
  return submit_collective("all_gather", [this, in, out, timeout_ms](std::uint32_t tag) {
    if (size_ == 1 || in.count == 0) {
      if (in.count > 0) std::memmove(out.data, in.data, in.bytes());
      return;
    }
    if (shm_) {
      shm_->all_gather(in, out, std::chrono::steady_clock::now() + timeout_ms);
      return;
    }
    gloo::AllgatherOptions opts(context_);
    with_element_type(in.dtype, [&]<class T>() {
      opts.setInput(static_cast<T*>(in.data), in.count);
      opts.setOutput(static_cast<T*>(out.data), out.count);
    });
    opts.setTag(tag);
    opts.setTimeout(timeout_ms);
    gloo::allgather(opts);
  });
}

// Gloo 0.5 has no reduce_scatter with options: all_reduce a copy of the input, keep our slice.
std::shared_ptr<Work> GlooProcessGroup::reduce_scatter(Tensor in, Tensor out, ReduceOp op) {
  check_tensor("reduce_scatter", in);
  check_tensor("reduce_scatter", out);
  if (in.dtype != out.dtype || in.count != out.count * static_cast<std::size_t>(size_)) {
    throw ConfigError(fmt::format(
        "gloo reduce_scatter: input must hold size() x output = {} elements of the same dtype, "
        "not {}",
        out.count * static_cast<std::size_t>(size_), in.count));
  }
  const auto timeout_ms = timeout();
  return submit_collective("reduce_scatter", [this, in, out, op, timeout_ms](std::uint32_t tag) {
    std::vector<std::uint8_t> scratch(static_cast<const std::uint8_t*>(in.data),
                                      static_cast<const std::uint8_t*>(in.data) + in.bytes());
    // Summed over the whole input, divided over this rank's part only.
    const ReduceOp sum_op = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
    reduce_in_place(Tensor{scratch.data(), in.count, in.dtype}, sum_op, tag, timeout_ms);
    if (out.count > 0) {
      std::memcpy(out.data, scratch.data() + static_cast<std::size_t>(rank_) * out.bytes(),
                  out.bytes());
    }
    if (op == ReduceOp::kAvg) divide_by_count(out, size_);
  });
}

std::shared_ptr<Work> GlooProcessGroup::barrier() {
  const auto timeout_ms = timeout();
  return submit_collective("barrier", [this, timeout_ms](std::uint32_t tag) {
    if (size_ == 1) return;
    if (shm_) {
      shm_->barrier(std::chrono::steady_clock::now() + timeout_ms);
      return;
    }
    gloo::BarrierOptions opts(context_);
    opts.setTag(tag);
    opts.setTimeout(timeout_ms);
    gloo::barrier(opts);
  });
}

std::shared_ptr<Work> GlooProcessGroup::send(Tensor t, int dst, int tag) {
  check_tensor("send", t);
  check_peer("send", dst);
  std::shared_ptr<gloo::transport::UnboundBuffer> buffer =
      context_->createUnboundBuffer(t.data, t.bytes());
  buffer->send(dst, kP2PSlotBase | static_cast<std::uint32_t>(tag));
  const auto timeout_ms = timeout();
  const std::string peer = describe_ranks({dst});
  return p2p_waiter_->submit([buffer, timeout_ms, peer, tag] {
    try {
      buffer->waitSend(timeout_ms);
    } catch (const gloo::Exception& e) {
      const std::string message =
          fmt::format("gloo send to {} (tag {}) failed: {}", peer, tag, e.what());
      if (is_timeout_message(e.what())) throw TimeoutError(message);
      throw IoError(message);
    }
  });
}

std::shared_ptr<Work> GlooProcessGroup::recv(Tensor t, int src, int tag) {
  check_tensor("recv", t);
  check_peer("recv", src);
  std::shared_ptr<gloo::transport::UnboundBuffer> buffer =
      context_->createUnboundBuffer(t.data, t.bytes());
  buffer->recv(src, kP2PSlotBase | static_cast<std::uint32_t>(tag));
  const auto timeout_ms = timeout();
  const std::string peer = describe_ranks({src});
  return p2p_waiter_->submit([buffer, timeout_ms, peer, tag] {
    try {
      buffer->waitRecv(timeout_ms);
    } catch (const gloo::Exception& e) {
      const std::string message =
          fmt::format("gloo recv from {} (tag {}) failed: {}", peer, tag, e.what());
      if (is_timeout_message(e.what())) throw TimeoutError(message);
      throw IoError(message);
    }
  });
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
  auto store = store_->with_prefix(fmt::format("group_{}/", number));
  std::shared_ptr<GlooProcessGroup> group(
      new GlooProcessGroup(std::move(store), static_cast<int>(self - ranks.begin()),
                           static_cast<int>(ranks.size()), ranks, shared_));
  group->set_timeout(timeout());
  group->connect();
  return group;
}

}  // namespace ddp::coll
