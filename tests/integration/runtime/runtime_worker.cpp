// runtime_worker: a libddp program for the runtime integration tests, run under ddprun (or with
// the launcher's variables set by hand). Joins with ddp::init() and runs one scenario:
//   ops <count>...        every op x every dtype at each element count (exact results)
//   ops-cuda <count>...   `ops` through the NCCL backend on device buffers (device LOCAL_RANK)
//   cuda-devices          prints "cuda_devices=<n>" (0 in a build without CUDA) and exits 0
//   ops-big <bytes>       64 MiB-class tensors: all_reduce sum on every dtype, every other op on
//                         float32 (the small sizes cover every op x dtype)
//   subgroups             new_group of the even and the odd ranks, and a nested group
//   timeout               the last rank exits at once; the others' all_reduce must name it
//   restart               attempt 0: rank 1 fails after one all_reduce; attempt 1 must succeed
//                         and must not see attempt 0's keys
// Prints "OK <scenario> rank=<r>" and exits 0, or prints each failure and exits 1.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/log.hpp"
#include "ddp/error.hpp"
#include "ddp/init.hpp"
#include "op_checks.hpp"
#include "ddp/devices.hpp"
#include "rendezvous/store_client/blocking_store.hpp"

namespace {

using ddp::DType;

constexpr DType kAllTypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                               DType::kInt32,   DType::kInt64,   DType::kUInt8};

int finish(const std::string& scenario, int rank, const std::vector<std::string>& failures) {
  for (const auto& f : failures) std::printf("FAIL rank=%d %s\n", rank, f.c_str());
  if (failures.empty()) std::printf("OK %s rank=%d\n", scenario.c_str(), rank);
  std::fflush(stdout);
  return failures.empty() ? 0 : 1;
}

void append(std::vector<std::string>& to, std::vector<std::string> from) {
  to.insert(to.end(), from.begin(), from.end());
}

int run_ops(const std::vector<std::string>& args, bool on_device) {
  ddp::InitOptions options;
  if (on_device) options.backend = "nccl";
  auto ctx = ddp::init(options);
  if (on_device) ddp::test::use_device_buffers(ctx.local_rank);
  std::vector<std::string> failures;
  for (std::size_t a = 1; a < args.size(); ++a) {
    const std::size_t count = std::stoull(args[a]);
    for (DType t : kAllTypes) append(failures, ddp::test::check_collectives(*ctx.group, t, count));
    append(failures, ddp::test::check_send_recv(*ctx.group, count));
  }
  return finish(args[0], ctx.rank, failures);
}

int run_ops_big(const std::vector<std::string>& args) {
  auto ctx = ddp::init();
  const std::size_t bytes = std::stoull(args.at(1));
  std::vector<std::string> failures;
  for (DType t : kAllTypes) {
    append(failures, ddp::test::check_all_reduce(*ctx.group, t, bytes / ddp::dtype_size(t),
                                                 {ddp::ReduceOp::kSum}));
  }
  append(failures, ddp::test::check_data_movement(*ctx.group, DType::kFloat32, bytes / 4));
  return finish("ops-big", ctx.rank, failures);
}

int run_subgroups() {
  auto ctx = ddp::init();
  std::vector<int> evens, odds;
  for (int r = 0; r < ctx.world_size; ++r) (r % 2 == 0 ? evens : odds).push_back(r);
  auto even_group = ctx.group->new_group(evens);
  auto odd_group = ctx.group->new_group(odds);
  auto mine = ctx.rank % 2 == 0 ? even_group : odd_group;
  std::vector<std::string> failures;
  if (mine == nullptr || (ctx.rank % 2 == 0 ? odd_group : even_group) != nullptr) {
    failures.push_back("new_group returned a group to a non-member or none to a member");
    return finish("subgroups", ctx.rank, failures);
  }
  // Sum of the global ranks of my parity class.
  std::vector<std::int64_t> v{ctx.rank};
  mine->all_reduce(ddp::Tensor{v.data(), 1, DType::kInt64}, ddp::ReduceOp::kSum)->wait();
  std::int64_t expected = 0;
  for (int r : (ctx.rank % 2 == 0 ? evens : odds)) expected += r;
  if (v[0] != expected) failures.push_back(fmt::format("subgroup sum {} != {}", v[0], expected));
  append(failures, ddp::test::check_collectives(*mine, DType::kFloat32, 11));
  // A nested group: the first rank of my parity class alone.
  auto nested = mine->new_group({ctx.rank % 2});
  if ((ctx.rank < 2) != (nested != nullptr))
    failures.push_back("nested new_group membership wrong");
  if (nested != nullptr && nested->size() != 1) failures.push_back("nested group size is not 1");
  // The world group still works after the sub-groups.
  append(failures, ddp::test::check_collectives(*ctx.group, DType::kInt32, 3));
  return finish("subgroups", ctx.rank, failures);
}

int run_timeout() {
  ddp::InitOptions options;
  options.timeout = std::chrono::seconds(5);
  auto ctx = ddp::init(options);
  std::vector<float> v{1.0f};
  ctx.group->all_reduce(ddp::Tensor{v.data(), 1, DType::kFloat32}, ddp::ReduceOp::kSum)->wait();
  const int leaver = ctx.world_size - 1;
  if (ctx.rank == leaver) {
    std::printf("LEAVING rank=%d\n", ctx.rank);
    std::fflush(stdout);
    std::_Exit(0);  // gone without a goodbye, as a crashed rank would be
  }
  try {
    ctx.group->all_reduce(ddp::Tensor{v.data(), 1, DType::kFloat32}, ddp::ReduceOp::kSum)->wait();
  } catch (const ddp::Error& e) {
    std::printf("ERROR rank=%d %s\n", ctx.rank, e.what());
    const bool names_it =
        std::string(e.what()).find(fmt::format("rank [{}]", leaver)) != std::string::npos;
    return finish(
        "timeout", ctx.rank,
        names_it ? std::vector<std::string>{} : std::vector<std::string>{"leaver not named"});
  }
  return finish("timeout", ctx.rank, {"all_reduce without the last rank succeeded"});
}

int run_restart() {
  auto ctx = ddp::init();
  std::vector<std::string> failures;
  std::vector<float> v{static_cast<float>(ctx.rank)};
  ctx.group->all_reduce(ddp::Tensor{v.data(), 1, DType::kFloat32}, ddp::ReduceOp::kSum)->wait();
  if (ctx.restart_count == 0) {
    if (ctx.rank == 1) {
      std::printf("FAILING attempt=0 rank=1\n");
      std::fflush(stdout);
      return 3;
    }
    // The others wait for the agent to stop them (their next collective cannot complete).
    ctx.group->barrier()->wait();
    return finish("restart-attempt0-survived", ctx.rank, {"barrier without rank 1 succeeded"});
  }
  append(failures, ddp::test::check_collectives(*ctx.group, DType::kFloat32, 5));
  // Attempt 0's keys are still in the store, under their own prefix only.
  auto raw = ddp::rdzv::BlockingStore::connect(ctx.master_addr,
                                               static_cast<std::uint16_t>(ctx.master_port), {}, "");
  const bool old_left = raw->check({"ddp/attempt_0/world/0"});
  const bool mine_here = raw->check({fmt::format("ddp/attempt_{}/world/0", ctx.restart_count)});
  if (!old_left) failures.push_back("attempt 0's keys are not where expected");
  if (!mine_here) failures.push_back("this attempt's keys are not under its own prefix");
  return finish(fmt::format("restart attempt={}", ctx.restart_count), ctx.rank, failures);
}

}  // namespace

int main(int argc, char** argv) {
  ddp::log::load_env_levels();  // SPDLOG_LEVEL=coll=debug shows the group's all_reduce algorithm
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::fprintf(stderr,
                 "usage: runtime_worker "
                 "ops|ops-cuda|cuda-devices|ops-big|subgroups|timeout|restart [args]\n");
    return 2;
  }
  try {
    if (args[0] == "ops") return run_ops(args, false);
    if (args[0] == "ops-cuda") return run_ops(args, true);
    if (args[0] == "cuda-devices") {
      std::printf("cuda_devices=%d\n", ddp::visible_cuda_devices());
      return 0;
    }
    if (args[0] == "ops-big") return run_ops_big(args);
    if (args[0] == "subgroups") return run_subgroups();
    if (args[0] == "timeout") return run_timeout();
    if (args[0] == "restart") return run_restart();
  } catch (const ddp::ConfigError& e) {
    std::fprintf(stderr, "runtime_worker: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "runtime_worker: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "runtime_worker: unknown scenario %s\n", args[0].c_str());
  return 2;
}
