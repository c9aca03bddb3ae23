// GlooProcessGroup's collectives. Tags: collective number `seq` (the same on every rank, since
// ranks issue collectives in the same order) is the Gloo tag, so two collectives never share a
// slot. Each runs on the worker thread, by shared memory or by Gloo (see
// gloo_transport_choice.cpp).
#include <fmt/format.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>

#include <algorithm>
#include <cstring>

#include "collectives/arrival_tracker.hpp"
#include "collectives/gloo/element_type.hpp"
#include "collectives/gloo/gloo_failure.hpp"
#include "collectives/gloo/gloo_process_group.hpp"
#include "collectives/op_worker.hpp"
#include "collectives/reduce_functions.hpp"
#include "collectives/shm/shm_collectives.hpp"
#include "common/log.hpp"
#include "ddp/error.hpp"

namespace ddp::coll {
namespace {

gloo::AllreduceOptions::Algorithm gloo_algorithm(AllreduceAlgorithm a) {
  return a == AllreduceAlgorithm::kBcube ? gloo::AllreduceOptions::Algorithm::BCUBE
                                         : gloo::AllreduceOptions::Algorithm::RING;
}

}  // namespace

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

std::shared_ptr<Work> GlooProcessGroup::submit_collective(const char* name,
                                                          std::function<void(std::uint32_t)> body) {
  const std::uint64_t seq = ++next_seq_;
  return worker_->submit([this, name, seq, body = std::move(body)] {
    throw_if_broken(name, seq);
    arrivals_->arrive(seq);
    try {
      body(static_cast<std::uint32_t>(seq));
    } catch (const TimeoutError& e) {  // shm::PeerFlags: reported like Gloo's own timeouts
      fail_collective(name, seq, e);
    } catch (const ddp::Error&) {
      throw;
    } catch (const std::exception& e) {  // gloo::Exception, gloo::EnforceNotMet, a dead shm peer
      fail_collective(name, seq, e);
    }
  });
}

void GlooProcessGroup::fail_collective(const char* name, std::uint64_t seq,
                                       const std::exception& e) {
  const std::string what = e.what();
  if (aborted_.load()) {  // abort() woke it: no peer to name, and the store may be gone
    const std::string message =
        fmt::format("gloo {} #{} aborted on rank {}: {}", name, seq, global_ranks_[rank_], what);
    log::get("coll")->info("{}", message);
    throw IoError(message);
  }
  const bool timed_out = is_gloo_timeout(e);
  // A zero grace skips the store entirely: its host may be the node that was lost.
  const auto grace = std::min(timeout(), options_.arrival_grace);
  const auto missing =
      grace.count() > 0 ? arrivals_->missing_ranks(seq, grace) : std::vector<int>{};
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
  throw_gloo_failure(e, message);
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

}  // namespace ddp::coll
