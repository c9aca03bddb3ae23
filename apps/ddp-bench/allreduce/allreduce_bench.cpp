// ddp-bench-allreduce: float32 sum all_reduce bus bandwidth per size, on every rank of a job a
// launcher started (`ddprun --nproc_per_node=2 build/bin/ddp-bench allreduce --sizes 4K..256M`).
// --mode ddp goes through libddp (ddp::init, ProcessGroup, Work); --mode gloo is the baseline that
// calls Gloo directly with the same algorithm (ring or bcube; libddp's shared-memory algorithm,
// --algorithm shm, has no Gloo counterpart); --mode paired runs both in one process, one operation
// of each in turn with the order flipping every iteration, so that both meet the same load. Rank 0
// prints one line (or one JSON object) per size and mode: mean and median time of an operation.
// --check verifies every iteration's result (outside the timed region) and exits 1 on a wrong
// one. Iteration counts depend only on the size, so every rank runs the same number. --mode nccl
// reduces a buffer on GPU LOCAL_RANK through libddp's NCCL backend (timed to the operation's
// completion on the device; --check copies in and out outside the timed region).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <vector>

#include "ddp/error.hpp"
#include "ddp/init.hpp"
#include "ddp/launch_env.hpp"
#include "device_buffer.hpp"
#include "gloo_direct.hpp"
#include "rendezvous/net_address.hpp"
#include "size_list.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string sizes = "4K..256M";
  std::size_t factor = 4;
  std::string mode = "ddp";
  std::string algorithm = "ring";
  int iters = 0;  // 0: by size
  int warmup = 2;
  bool json = false;
  bool check = false;
};

int iterations_for(std::size_t bytes, int requested) {
  if (requested > 0) return requested;
  return static_cast<int>(std::clamp<std::size_t>((std::size_t{512} << 20) / bytes, 5, 200));
}

struct Runner {
  std::string mode;  // "ddp" or "gloo": the name printed
  std::function<void(float*, std::size_t)> all_reduce;
  std::function<void()> barrier;
  // Device runners only: copy host data to the buffer all_reduce works on, and back (untimed).
  std::function<void(float*, std::size_t)> upload;
  std::function<void(float*, std::size_t)> download;
  int rank = 0;
  int size = 1;
};

// Seconds of one operation: the mean over the timed iterations (the bandwidth printed) and the
// median (robust to the odd operation a noisy machine stretches; what scripts/bench compares).
struct OpTimes {
  double mean = 0;
  double median = 0;
};

OpTimes summarize(std::vector<double> seconds) {
  OpTimes t;
  for (double s : seconds) t.mean += s / static_cast<double>(seconds.size());
  const auto middle = seconds.begin() + static_cast<std::ptrdiff_t>(seconds.size() / 2);
  std::nth_element(seconds.begin(), middle, seconds.end());
  t.median = *middle;
  if (seconds.size() % 2 == 0) {  // the mean of the two middle values
    t.median = (t.median + *std::max_element(seconds.begin(), middle)) / 2;
  }
  return t;
}

void print_result(const Runner& runner, const Options& o, std::size_t bytes, int iters,
                  OpTimes times, std::optional<bool> correct) {
  const double algbw = static_cast<double>(bytes) / times.mean / 1e9;
  const double busbw = algbw * 2.0 * (runner.size - 1) / runner.size;
  if (o.json) {
    nlohmann::json line{{"version", 1},
                        {"benchmark", "allreduce"},
                        {"mode", runner.mode},
                        {"algorithm", o.algorithm},
                        {"dtype", "float32"},
                        {"op", "sum"},
                        {"world_size", runner.size},
                        {"size_bytes", bytes},
                        {"iters", iters},
                        {"time_us", times.mean * 1e6},
                        {"time_us_median", times.median * 1e6},
                        {"algbw_gbps", algbw},
                        {"busbw_gbps", busbw}};
    if (correct) line["check"] = *correct ? "ok" : "wrong";
    std::printf("%s\n", line.dump().c_str());
  } else {
    std::printf(
        "%-8s %-6s %-6s n=%d iters=%-4d time=%10.1fus median=%10.1fus algbw=%7.3fGB/s "
        "busbw=%7.3fGB/s%s\n",
        ddp::bench::format_size(bytes).c_str(), runner.mode.c_str(), o.algorithm.c_str(),
        runner.size, iters, times.mean * 1e6, times.median * 1e6, algbw, busbw,
        correct ? (*correct ? " check=ok" : " check=WRONG") : "");
  }
  std::fflush(stdout);
}

// Times every runner on the same size, one operation of each in turn (--mode paired runs ddp and
// gloo in one process, so both see the same moments of a noisy machine). The order flips every
// iteration: the first operation of a turn also absorbs the ranks' skew since the last one, so a
// fixed order would charge that skew to one runner. Returns false when --check found a wrong
// element.
bool run_size(const std::vector<Runner>& runners, const Options& o, std::size_t bytes) {
  const std::size_t count = bytes / sizeof(float);
  const int rank = runners.front().rank;
  const int size = runners.front().size;
  const float expected = static_cast<float>(size * (size + 1) / 2);
  const std::size_t n = runners.size();
  std::vector<std::vector<float>> data(n, std::vector<float>(count, 0.0f));
  for (std::size_t k = 0; k < n; ++k) {
    for (int i = 0; i < o.warmup; ++i) runners[k].all_reduce(data[k].data(), count);
  }
  const int iters = iterations_for(bytes, o.iters);
  runners.front().barrier();
  std::vector<std::vector<double>> seconds(n);
  std::vector<bool> correct(n, true);
  for (int i = 0; i < iters; ++i) {
    for (std::size_t turn = 0; turn < n; ++turn) {
      const std::size_t k = i % 2 == 0 ? turn : n - 1 - turn;
      auto& v = data[k];
      if (o.check) std::fill(v.begin(), v.end(), static_cast<float>(rank + 1));
      if (o.check && runners[k].upload) runners[k].upload(v.data(), count);
      const auto start = Clock::now();
      runners[k].all_reduce(v.data(), count);
      seconds[k].push_back(std::chrono::duration<double>(Clock::now() - start).count());
      if (o.check && runners[k].download) runners[k].download(v.data(), count);
      if (o.check && std::any_of(v.begin(), v.end(), [&](float x) { return x != expected; })) {
        correct[k] = false;
      }
    }
  }
  bool all_correct = true;
  for (std::size_t k = 0; k < n; ++k) {
    if (rank == 0) {
      print_result(runners[k], o, bytes, iters, summarize(seconds[k]),
                   o.check ? std::optional<bool>(correct[k]) : std::nullopt);
    }
    if (!correct[k]) {
      std::fprintf(stderr, "rank %d: wrong %s all_reduce result at %zu bytes\n", rank,
                   runners[k].mode.c_str(), bytes);
      all_correct = false;
    }
  }
  return all_correct;
}

Runner ddp_runner(const Options& o, std::optional<ddp::Context>& ctx) {
  setenv("DDP_ALLREDUCE_ALGORITHM", o.algorithm.c_str(), 1);
  ddp::InitOptions init;
  init.backend = "gloo";
  ctx = ddp::init(init);
  auto group = ctx->group;
  Runner runner;
  runner.mode = "ddp";
  runner.rank = ctx->rank;
  runner.size = ctx->world_size;
  runner.all_reduce = [group](float* data, std::size_t count) {
    group->all_reduce({data, count, ddp::DType::kFloat32}, ddp::ReduceOp::kSum)->wait();
  };
  runner.barrier = [group] { group->barrier()->wait(); };
  return runner;
}

// libddp's NCCL backend on one device buffer of the largest size, reused for every size (the
// host pointer all_reduce gets is ignored: upload/download move data for --check).
Runner nccl_runner(std::optional<ddp::Context>& ctx, std::size_t max_count,
                   std::shared_ptr<ddp::bench::DeviceBuffer>& buffer) {
  ddp::InitOptions init;
  init.backend = "nccl";
  ctx = ddp::init(init);
  auto group = ctx->group;
  const int device = ctx->local_rank;
  buffer = std::make_shared<ddp::bench::DeviceBuffer>(max_count, device);
  auto* buf = buffer.get();
  Runner runner;
  runner.mode = "nccl";
  runner.rank = ctx->rank;
  runner.size = ctx->world_size;
  runner.all_reduce = [group, buf, device](float*, std::size_t count) {
    group->all_reduce({buf->data(), count, ddp::DType::kFloat32, ddp::DeviceKind::kCuda, device},
                      ddp::ReduceOp::kSum)
        ->wait();
  };
  runner.barrier = [group] { group->barrier()->wait(); };
  runner.upload = [buf](float* host, std::size_t count) { buf->upload(host, count); };
  runner.download = [buf](float* host, std::size_t count) { buf->download(host, count); };
  return runner;
}

Runner gloo_runner(const Options& o, std::unique_ptr<ddp::bench::GlooDirect>& direct) {
  const ddp::LaunchEnv env = ddp::read_launch_env();
  const auto port = static_cast<std::uint16_t>(env.master_port);
  Runner runner;
  runner.mode = "gloo";
  runner.rank = env.rank;
  runner.size = env.world_size;
  direct = std::make_unique<ddp::bench::GlooDirect>(env.master_addr, port, runner.rank,
                                                    runner.size,
                                                    ddp::rdzv::route_address(env.master_addr, port),
                                                    o.algorithm);
  auto* gloo = direct.get();
  runner.all_reduce = [gloo](float* data, std::size_t count) { gloo->all_reduce_sum(data, count); };
  runner.barrier = [gloo] {  // a one-element all_reduce is a barrier
    float one = 0;
    gloo->all_reduce_sum(&one, 1);
  };
  return runner;
}

int run(const Options& o) {
  const auto sizes = ddp::bench::parse_sizes(o.sizes, o.factor);
  std::optional<ddp::Context> ctx;
  std::unique_ptr<ddp::bench::GlooDirect> direct;
  std::vector<Runner> runners;
  std::shared_ptr<ddp::bench::DeviceBuffer> buffer;
  if (o.mode == "nccl") {
    const std::size_t largest = sizes.empty() ? 0 : *std::max_element(sizes.begin(), sizes.end());
    runners.push_back(nccl_runner(ctx, largest / sizeof(float), buffer));
  }
  if (o.mode == "ddp" || o.mode == "paired") runners.push_back(ddp_runner(o, ctx));
  if (o.mode == "gloo" || o.mode == "paired") runners.push_back(gloo_runner(o, direct));
  bool all_correct = true;
  for (std::size_t bytes : sizes) {
    if (bytes < sizeof(float)) continue;
    all_correct = run_size(runners, o, bytes) && all_correct;
  }
  return all_correct ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"all_reduce bus bandwidth per size (float32 sum); run under ddprun"};
  app.add_option("--sizes", o.sizes,
                 "A..B (every power of --factor) or a comma list; K/M/G suffixes")
      ->capture_default_str();
  app.add_option("--factor", o.factor, "step of an A..B range")->capture_default_str();
  app.add_option("--mode", o.mode,
                 "ddp (libddp), gloo (Gloo called directly, the baseline), paired (both in one "
                 "process, one operation of each in turn), or nccl (libddp's NCCL backend on a "
                 "buffer on GPU LOCAL_RANK)")
      ->check(CLI::IsMember({"ddp", "gloo", "paired", "nccl"}))
      ->capture_default_str();
  app.add_option("--algorithm", o.algorithm, "ring, bcube, or (--mode ddp) shm or auto")
      ->check(CLI::IsMember({"ring", "bcube", "shm", "auto"}))
      ->capture_default_str();
  app.add_option("--iters", o.iters, "timed iterations per size (default: by size, 5..200)");
  app.add_option("--warmup", o.warmup, "untimed iterations per size")->capture_default_str();
  app.add_flag("--json", o.json, "one JSON object per size");
  app.add_flag("--check", o.check, "verify every result; exit 1 on a wrong one");
  CLI11_PARSE(app, argc, argv);
  if (o.mode != "ddp" && (o.algorithm == "shm" || o.algorithm == "auto")) {
    std::fprintf(stderr,
                 "ddp-bench-allreduce: --algorithm %s is libddp's; --mode %s takes ring or "
                 "bcube\n",
                 o.algorithm.c_str(), o.mode.c_str());
    return 2;
  }
  try {
    return run(o);
  } catch (const ddp::ConfigError& e) {
    std::fprintf(stderr, "ddp-bench-allreduce: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp-bench-allreduce: %s\n", e.what());
    return 1;
  }
}
