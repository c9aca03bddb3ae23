// NcclProcessGroup: ProcessGroup calls enqueue NCCL work on the group's stream and return an
// event-backed Work. Calls come from one thread at a time (the ProcessGroup contract), so the
// sequence numbers match across ranks and the arrival marks name the late ranks on a timeout.
#include "collectives/nccl/nccl_process_group.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "collectives/arrival_tracker.hpp"
#include "collectives/nccl/nccl_communicator.hpp"
#include "ddp/error.hpp"

namespace ddp::coll {
namespace {

using Clock = NcclCommunicator::Clock;

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::kFloat32: return ncclFloat32;
    case DType::kFloat64: return ncclFloat64;
    case DType::kFloat16: return ncclFloat16;
    case DType::kBFloat16: return ncclBfloat16;
    case DType::kInt32: return ncclInt32;
    case DType::kInt64: return ncclInt64;
    case DType::kUInt8: return ncclUint8;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kAvg: return ncclAvg;
    case ReduceOp::kProduct: return ncclProd;
    case ReduceOp::kMin: return ncclMin;
    case ReduceOp::kMax: return ncclMax;
  }
  return ncclSum;
}

// Completion of one operation: an event recorded on the group's stream after the NCCL call.
class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<NcclCommunicator> comm, std::shared_ptr<ArrivalTracker> arrivals,
           std::vector<int> global_ranks, std::string name, std::uint64_t seq,
           std::chrono::milliseconds timeout)
      : comm_(std::move(comm)),
        arrivals_(std::move(arrivals)),
        global_ranks_(std::move(global_ranks)),
        name_(std::move(name)),
        seq_(seq),
        timeout_(timeout),
        start_(Clock::now()) {
    check_cuda(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "cudaEventCreate",
               comm_->device());
    check_cuda(cudaEventRecord(done_, comm_->stream()), "cudaEventRecord", comm_->device());
  }
  ~NcclWork() override { cudaEventDestroy(done_); }

  bool is_completed() override { return cudaEventQuery(done_) != cudaErrorNotReady; }

  void wait_on_stream() override {
    check_cuda(cudaStreamWaitEvent(cudaStreamLegacy, done_, 0), "cudaStreamWaitEvent",
               comm_->device());
  }

  void wait() override {
    // Polled rather than synchronized, to watch for NCCL's errors and the timeout. The first
    // kSpin only yields between polls, so a short operation is not charged a sleep's granularity.
    constexpr auto kSpin = std::chrono::microseconds(200);
    const auto waiting_since = Clock::now();
    for (;;) {
      const cudaError_t status = cudaEventQuery(done_);
      // An aborted kernel ends without an error: its output is partial, so it is a failure.
      if (comm_->is_aborted()) fail_aborted();
      if (status == cudaSuccess) return;
      if (status != cudaErrorNotReady) check_cuda(status, name_.c_str(), comm_->device());
      const ncclResult_t async = comm_->async_error();
      if (async != ncclSuccess && async != ncclInProgress) {
        throw IoError(
            fmt::format("nccl {} #{} failed: {}", name_, seq_, ncclGetErrorString(async)));
      }
      const auto now = Clock::now();
      if (now - start_ >= timeout_) fail_timeout();
      if (now - waiting_since < kSpin) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
  }

 private:
  [[noreturn]] void fail_aborted() {
    throw IoError(fmt::format("nccl {} #{} on cuda:{}: the communicator was aborted (a peer is "
                              "gone, or a new round began)",
                              name_, seq_, comm_->device()));
  }
  [[noreturn]] void fail_timeout() {
    comm_->abort();
    std::vector<int> missing;
    for (int r : arrivals_->missing_ranks(seq_, std::chrono::seconds(2))) {
      missing.push_back(global_ranks_.at(r));
    }
    throw TimeoutError(fmt::format("nccl {} #{} timed out after {}ms{}", name_, seq_,
                                   timeout_.count(),
                                   missing.empty() ? std::string()
                                                   : fmt::format(": ranks [{}] never arrived",
                                                                 fmt::join(missing, ", "))));
  }

  std::shared_ptr<NcclCommunicator> comm_;
  std::shared_ptr<ArrivalTracker> arrivals_;
  std::vector<int> global_ranks_;
  std::string name_;
  std::uint64_t seq_;
  std::chrono::milliseconds timeout_;
  Clock::time_point start_;
  cudaEvent_t done_ = nullptr;
};

class NcclProcessGroup final : public ProcessGroup {
 public:
  NcclProcessGroup(std::shared_ptr<rdzv::BlockingStore> store, int rank, int size, int device,
                   std::chrono::milliseconds timeout, std::vector<int> global_ranks)
      : store_(std::move(store)), rank_(rank), size_(size), global_ranks_(std::move(global_ranks)) {
    set_timeout(timeout);
    if (global_ranks_.empty()) {
      for (int r = 0; r < size_; ++r) global_ranks_.push_back(r);
    }
    const auto deadline = Clock::now() + timeout;
    ncclUniqueId id;
    if (rank_ == 0) {
      const ncclResult_t result = ncclGetUniqueId(&id);
      if (result != ncclSuccess) {
        throw IoError(fmt::format("ncclGetUniqueId failed: {}", ncclGetErrorString(result)));
      }
      const auto* bytes = reinterpret_cast<const std::uint8_t*>(&id);
      store_->set("nccl_id", rdzv::Bytes(bytes, bytes + sizeof(id)));
    } else {
      rdzv::Bytes bytes;
      try {
        bytes = store_->get("nccl_id", timeout);
      } catch (const TimeoutError&) {
        throw TimeoutError(fmt::format("nccl group of {}: rank {} never published the unique id "
                                       "within {}ms", size_, global_ranks_[0], timeout.count()));
      }
      if (bytes.size() != sizeof(id)) {
        throw IoError(fmt::format("nccl group: unique id of {} bytes in the store, expected {}",
                                  bytes.size(), sizeof(id)));
      }
      std::memcpy(&id, bytes.data(), sizeof(id));
    }
    comm_ = std::make_shared<NcclCommunicator>(id, rank_, size_, device, deadline);
    arrivals_ = std::make_shared<ArrivalTracker>(store_, rank_, size_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }

  std::shared_ptr<Work> all_reduce(Tensor t, ReduceOp op) override {
    check_tensor("all_reduce", t);
    return enqueue("all_reduce", [&](ncclComm_t c, cudaStream_t s) {
      return ncclAllReduce(t.data, t.data, t.count, nccl_type(t.dtype), nccl_op(op), c, s);
    });
  }
  std::shared_ptr<Work> broadcast(Tensor t, int root) override {
    check_tensor("broadcast", t);
    if (root < 0 || root >= size_) {
      throw ConfigError(
          fmt::format("nccl broadcast: root {} is outside the group of {}", root, size_));
    }
    return enqueue("broadcast", [&](ncclComm_t c, cudaStream_t s) {
      return ncclBroadcast(t.data, t.data, t.count, nccl_type(t.dtype), root, c, s);
    });
  }
  std::shared_ptr<Work> all_gather(Tensor in, Tensor out) override {
    check_tensor("all_gather", in);
    check_tensor("all_gather", out);
    if (in.dtype != out.dtype || out.count != in.count * static_cast<std::size_t>(size_)) {
      throw ConfigError(
          "nccl all_gather: output must hold size() x input elements of the same dtype");
    }
    return enqueue("all_gather", [&](ncclComm_t c, cudaStream_t s) {
      return ncclAllGather(in.data, out.data, in.count, nccl_type(in.dtype), c, s);
    });
  }
  std::shared_ptr<Work> reduce_scatter(Tensor in, Tensor out, ReduceOp op) override {
    check_tensor("reduce_scatter", in);
    check_tensor("reduce_scatter", out);
    if (in.dtype != out.dtype || in.count != out.count * static_cast<std::size_t>(size_)) {
      throw ConfigError(
          "nccl reduce_scatter: input must hold size() x output elements of the same dtype");
    }
    return enqueue("reduce_scatter", [&](ncclComm_t c, cudaStream_t s) {
      return ncclReduceScatter(in.data, out.data, out.count, nccl_type(in.dtype), nccl_op(op), c,
                               s);
    });
  }
  std::shared_ptr<Work> barrier() override {
    if (barrier_buffer_ == nullptr) {
      check_cuda(cudaSetDevice(comm_->device()), "cudaSetDevice", comm_->device());
      check_cuda(cudaMalloc(&barrier_buffer_, sizeof(float)), "cudaMalloc", comm_->device());
    }
    auto work = enqueue("barrier", [&](ncclComm_t c, cudaStream_t s) {
      return ncclAllReduce(barrier_buffer_, barrier_buffer_, 1, ncclFloat32, ncclSum, c, s);
    });
    return work;
  }
  std::shared_ptr<Work> send(Tensor t, int dst, int /*tag*/) override {
    check_tensor("send", t);
    check_peer(dst);
    return enqueue("send", [&](ncclComm_t c, cudaStream_t s) {
      return ncclSend(t.data, t.count, nccl_type(t.dtype), dst, c, s);
    });
  }
  std::shared_ptr<Work> recv(Tensor t, int src, int /*tag*/) override {
    check_tensor("recv", t);
    check_peer(src);
    return enqueue("recv", [&](ncclComm_t c, cudaStream_t s) {
      return ncclRecv(t.data, t.count, nccl_type(t.dtype), src, c, s);
    });
  }

  std::shared_ptr<ProcessGroup> new_group(std::vector<int> ranks) override {
    if (ranks.empty() || !std::is_sorted(ranks.begin(), ranks.end()) ||
        std::adjacent_find(ranks.begin(), ranks.end()) != ranks.end()) {
      throw ConfigError(fmt::format("new_group([{}]): ranks must be sorted, unique and non-empty",
                                    fmt::join(ranks, ", ")));
    }
    for (int r : ranks) {
      if (std::find(global_ranks_.begin(), global_ranks_.end(), r) == global_ranks_.end()) {
        throw ConfigError(fmt::format("new_group: rank {} is not in the parent group", r));
      }
    }
    const int number = next_group_++;
    auto self = std::find(ranks.begin(), ranks.end(), global_ranks_[rank_]);
    if (self == ranks.end()) return nullptr;
    auto child = std::make_shared<NcclProcessGroup>(
        store_->with_prefix(fmt::format("group_{}", number)),
        static_cast<int>(self - ranks.begin()), static_cast<int>(ranks.size()), comm_->device(),
        timeout(), ranks);
    std::lock_guard lock(children_mutex_);
    std::erase_if(children_, [](const auto& c) { return c.expired(); });
    children_.push_back(child);
    if (comm_->is_aborted()) child->abort();  // aborted while it was being made
    return child;
  }

  // Any thread. The sub-groups go too: their ranks wait on the same dead peers.
  bool abort() override {
    comm_->abort();
    std::lock_guard lock(children_mutex_);
    for (const auto& weak : children_) {
      if (auto child = weak.lock()) child->abort();
    }
    return true;
  }
  bool is_aborted() const override { return comm_->is_aborted(); }

  ~NcclProcessGroup() override {
    if (barrier_buffer_ != nullptr) cudaFree(barrier_buffer_);
  }

 private:
  template <class Call>
  std::shared_ptr<Work> enqueue(const char* name, Call&& call) {
    const std::uint64_t seq = ++next_seq_;
    arrivals_->arrive(seq);
    const int device = comm_->device();
    check_cuda(cudaSetDevice(device), "cudaSetDevice", device);
    // Order after the caller's work on the legacy default stream (where it produced the data).
    cudaEvent_t ready = nullptr;
    check_cuda(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreate", device);
    check_cuda(cudaEventRecord(ready, cudaStreamLegacy), "cudaEventRecord", device);
    check_cuda(cudaStreamWaitEvent(comm_->stream(), ready, 0), "cudaStreamWaitEvent", device);
    cudaEventDestroy(ready);
    comm_->launch(name, call, Clock::now() + timeout());
    return std::make_shared<NcclWork>(comm_, arrivals_, global_ranks_, name, seq, timeout());
  }

  void check_tensor(const char* name, const Tensor& t) const {
    if (t.device != DeviceKind::kCuda) {
      throw ConfigError(fmt::format("nccl {}: tensor is in host memory; the nccl backend takes "
                                    "CUDA tensors (use DDP_BACKEND=gloo)", name));
    }
    if (t.device_index != comm_->device()) {
      throw ConfigError(fmt::format("nccl {}: tensor is on cuda:{}, the group on cuda:{}", name,
                                    t.device_index, comm_->device()));
    }
  }
  void check_peer(int peer) const {
    if (peer < 0 || peer >= size_ || peer == rank_) {
      throw ConfigError(fmt::format(
          "nccl send/recv: peer {} is not another rank of this group of {}", peer, size_));
    }
  }

  std::shared_ptr<rdzv::BlockingStore> store_;
  int rank_;
  int size_;
  std::vector<int> global_ranks_;
  std::shared_ptr<NcclCommunicator> comm_;
  std::shared_ptr<ArrivalTracker> arrivals_;
  void* barrier_buffer_ = nullptr;
  std::uint64_t next_seq_ = 0;
  int next_group_ = 0;
  std::mutex children_mutex_;  // new_group() on the group's thread, abort() on any
  std::vector<std::weak_ptr<NcclProcessGroup>> children_;
};

}  // namespace

std::shared_ptr<ProcessGroup> make_nccl_group(std::shared_ptr<rdzv::BlockingStore> store, int rank,
                                              int size, int device,
                                              std::chrono::milliseconds timeout) {
  return std::make_shared<NcclProcessGroup>(std::move(store), rank, size, device, timeout,
                                            std::vector<int>{});
}

}  // namespace ddp::coll
