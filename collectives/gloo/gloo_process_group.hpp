#pragma once
// GlooProcessGroup: the CPU ProcessGroup over Debian's libgloo and its TCP transport. Ranks find
// each other through a rdzv::BlockingStore (GlooStoreAdapter + connectFullMesh). The collectives go
// through shared memory instead (shm::ShmCollectives) when every rank of the group is on this host
// and the algorithm allows it; send/recv always use Gloo. Collectives run on the group's own
// OpWorker thread in submission order; send/recv are posted at once on the caller's thread (so a
// send and a recv in either order cannot deadlock) and waited for on a second thread. Every
// operation uses the group's timeout(); a failure names the ranks that never arrived
// (ArrivalTracker) and breaks the group: later operations fail with the same cause. abort() (any
// thread) breaks it on purpose: it fails every pending Gloo transfer as a socket error would, so a
// collective blocked on a peer that is cut off, not dead, returns at once (gloo_abort.cpp).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/gloo/allreduce_algorithm.hpp"
#include "ddp/process_group.hpp"
#include "rendezvous/store_client/blocking_store.hpp"

namespace gloo {
class Context;
namespace transport {
class Device;
}
}  // namespace gloo

namespace ddp::coll {
namespace shm {
class ShmCollectives;
}

class OpWorker;
class ArrivalTracker;

struct GlooOptions {
  std::string hostname = "127.0.0.1";  // the address peers reach this rank at...
  std::string iface;                   // ...or a network interface (GLOO_SOCKET_IFNAME); wins
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::kAuto;
  std::string shm_domain;  // "" = shm::shared_memory_domain(); tests play several hosts with it
  // How long a failed collective waits for its peers' arrival marks before naming the ranks that
  // never came (at most `timeout`). In-process recovery wants the failure at once: 0 names none
  // and never touches the store (whose host may be the lost node).
  std::chrono::milliseconds arrival_grace{2000};
};

class GlooProcessGroup final : public ProcessGroup {
 public:
  // Collective: every rank of the group calls it with its rank and the same size and store.
  // Blocks until the full mesh is connected; throws TimeoutError naming the ranks that did not
  // publish their address within options.timeout. `global_ranks` maps group ranks to job ranks
  // (empty: the identity).
  static std::shared_ptr<GlooProcessGroup> create(std::shared_ptr<rdzv::BlockingStore> store,
                                                  int rank, int size, GlooOptions options,
                                                  std::vector<int> global_ranks = {});
  ~GlooProcessGroup() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "gloo"; }
  // The all_reduce algorithm in use: never kAuto once the group exists.
  AllreduceAlgorithm algorithm() const;

  std::shared_ptr<Work> all_reduce(Tensor t, ReduceOp op) override;
  std::shared_ptr<Work> broadcast(Tensor t, int root) override;
  std::shared_ptr<Work> all_gather(Tensor in, Tensor out) override;
  std::shared_ptr<Work> reduce_scatter(Tensor in, Tensor out, ReduceOp op) override;
  std::shared_ptr<Work> barrier() override;
  std::shared_ptr<Work> send(Tensor t, int dst, int tag = 0) override;
  std::shared_ptr<Work> recv(Tensor t, int src, int tag = 0) override;
  std::shared_ptr<ProcessGroup> new_group(std::vector<int> ranks) override;

  // Any thread: breaks this group and its sub-groups for good. The operation blocked in it (a
  // Gloo transfer, or a shared-memory wait within a few milliseconds) and every later one fail
  // with IoError "... aborted ..."; the group's connections close, so its peers' operations with
  // it fail too. Always true. Destroying the group afterwards does not wait for its peers.
  bool abort() override;
  bool is_aborted() const override { return aborted_.load(); }

 private:
  struct Shared;  // device and options shared with sub-groups
  GlooProcessGroup(std::shared_ptr<rdzv::BlockingStore> store, int rank, int size,
                   std::vector<int> global_ranks, std::shared_ptr<Shared> shared);
  void connect();
  void connect_shared_memory();
  // kAuto across hosts: shared memory within this host and a Gloo context among the hosts'
  // leaders, if every rank of the group can (decided together); else nothing changes (ring).
  void connect_hierarchical(const std::vector<std::string>& domains);
  void hierarchical_all_reduce(const Tensor& t, ReduceOp op, std::uint32_t tag,
                               std::chrono::milliseconds timeout);
  std::shared_ptr<gloo::transport::Device> device() const;  // shared with sub-groups
  std::string domain() const;  // this rank's shared-memory domain (options_.shm_domain for tests)
  const char* transport_name() const;
  // all_reduce of `t` in place, by shared memory or by Gloo, divided by size() for kAvg; runs on
  // the worker thread.
  void reduce_in_place(const Tensor& t, ReduceOp op, std::uint32_t tag,
                       std::chrono::milliseconds timeout);

  // Queues `body` as collective number `seq` on the worker thread, with arrival tracking and
  // error translation ("<name> #seq").
  std::shared_ptr<Work> submit_collective(const char* name,
                                          std::function<void(std::uint32_t)> body);
  [[noreturn]] void fail_collective(const char* name, std::uint64_t seq, const std::exception& e);
  std::string describe_ranks(const std::vector<int>& group_ranks) const;
  void check_tensor(const char* name, const Tensor& t) const;
  void check_peer(const char* name, int peer) const;
  // send (`sending`) or recv of `t` with `peer`: posts the buffer now, waits on the p2p thread.
  std::shared_ptr<Work> post_p2p(bool sending, Tensor t, int peer, int tag);
  // Throws IoError when the group is broken (aborted, or an earlier failure).
  void throw_if_broken(const char* name, std::uint64_t seq);
  // Fails every pending transfer of `context` (and closes its connections) with `why`.
  static void fail_transfers(gloo::Context& context, const std::string& why);

  std::shared_ptr<rdzv::BlockingStore> store_;
  int rank_;
  int size_;
  std::vector<int> global_ranks_;
  std::shared_ptr<Shared> shared_;
  GlooOptions& options_;
  std::shared_ptr<gloo::Context> context_;
  std::unique_ptr<shm::ShmCollectives> shm_;       // set when algorithm() is kShm and size_ > 1
  bool hierarchical_ = false;                      // algorithm() is kHierarchical
  std::unique_ptr<shm::ShmCollectives> host_shm_;  // hierarchical: this host's ranks, if > 1
  std::shared_ptr<gloo::Context> leaders_;         // hierarchical: the leaders, on leaders only
  std::uint64_t next_seq_ = 0;                     // caller thread: same sequence on every rank
  int next_group_ = 0;                             // caller thread
  std::mutex broken_mutex_;
  std::string broken_;  // guarded by broken_mutex_: the first failure, once the group is broken
  std::atomic<bool> aborted_{false};
  std::mutex sub_groups_mutex_;
  std::vector<std::weak_ptr<GlooProcessGroup>> sub_groups_;  // guarded: aborted with this group
  std::unique_ptr<ArrivalTracker> arrivals_;
  std::unique_ptr<OpWorker> p2p_waiter_;
  std::unique_ptr<OpWorker> worker_;  // last: joined first, while everything above still exists
};

}  // namespace ddp::coll
