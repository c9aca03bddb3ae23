// ddp-bench-allreduce: float32 sum all_reduce bus bandwidth per size, on every rank of a job a
// launcher started (`ddprun --nproc_per_node=2 build/bin/ddp-bench allreduce --sizes 4K..256M`).
// --mode ddp goes through libddp (ddp::init, ProcessGroup, Work); --mode gloo is the baseline that
// calls Gloo directly with the same algorithm (ring or bcube; libddp's shared-memory algorithm,
// --algorithm shm, has no Gloo counterpart). Rank 0 prints one line (or one JSON object) per
// size. --check verifies every iteration's result (outside the timed region) and exits 1 on a
// wrong one. Iteration counts depend only on the size, so every rank runs the same number.
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
#include "gloo_direct.hpp"
#include "runtime/src/launcher_env.hpp"
#include "runtime/src/local_address.hpp"
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
  std::function<void(float*, std::size_t)> all_reduce;
  std::function<void()> barrier;
  int rank = 0;
  int size = 1;
};

// Returns false when --check found a wrong element.
bool run_size(const Runner& runner, const Options& o, std::size_t bytes) {
  const std::size_t count = bytes / sizeof(float);
  std::vector<float> data(count, 0.0f);
  const float expected = static_cast<float>(runner.size * (runner.size + 1) / 2);
  for (int i = 0; i < o.warmup; ++i) runner.all_reduce(data.data(), count);
  const int iters = iterations_for(bytes, o.iters);
  runner.barrier();
  Clock::duration total{};
  bool correct = true;
  for (int i = 0; i < iters; ++i) {
    if (o.check) std::fill(data.begin(), data.end(), static_cast<float>(runner.rank + 1));
    const auto start = Clock::now();
    runner.all_reduce(data.data(), count);
    total += Clock::now() - start;
    if (o.check && std::any_of(data.begin(), data.end(), [&](float v) { return v != expected; })) {
      correct = false;
    }
  }
  const double seconds = std::chrono::duration<double>(total).count() / iters;
  const double algbw = static_cast<double>(bytes) / seconds / 1e9;
  const double busbw = algbw * 2.0 * (runner.size - 1) / runner.size;
  if (runner.rank == 0) {
    if (o.json) {
      nlohmann::json line{{"version", 1},         {"benchmark", "allreduce"},
                          {"mode", o.mode},       {"algorithm", o.algorithm},
                          {"dtype", "float32"},   {"op", "sum"},
                          {"world_size", runner.size}, {"size_bytes", bytes},
                          {"iters", iters},       {"time_us", seconds * 1e6},
                          {"algbw_gbps", algbw},  {"busbw_gbps", busbw}};
      if (o.check) line["check"] = correct ? "ok" : "wrong";
      std::printf("%s\n", line.dump().c_str());
    } else {
      std::printf("%-8s %-6s %-6s n=%d iters=%-4d time=%10.1fus algbw=%7.3fGB/s busbw=%7.3fGB/s%s\n",
                  ddp::bench::format_size(bytes).c_str(), o.mode.c_str(), o.algorithm.c_str(),
                  runner.size, iters, seconds * 1e6, algbw, busbw,
                  o.check ? (correct ? " check=ok" : " check=WRONG") : "");
    }
    std::fflush(stdout);
  }
  if (!correct) std::fprintf(stderr, "rank %d: wrong all_reduce result at %zu bytes\n", runner.rank, bytes);
  return correct;
}

int run(const Options& o) {
  const auto sizes = ddp::bench::parse_sizes(o.sizes, o.factor);
  Runner runner;
  std::optional<ddp::Context> ctx;
  std::unique_ptr<ddp::bench::GlooDirect> direct;
  if (o.mode == "ddp") {
    setenv("DDP_ALLREDUCE_ALGORITHM", o.algorithm.c_str(), 1);
    ddp::InitOptions init;
    init.backend = "gloo";
    ctx = ddp::init(init);
    auto group = ctx->group;
    runner.rank = ctx->rank;
    runner.size = ctx->world_size;
    runner.all_reduce = [group](float* data, std::size_t count) {
      group->all_reduce({data, count, ddp::DType::kFloat32}, ddp::ReduceOp::kSum)->wait();
    };
    runner.barrier = [group] { group->barrier()->wait(); };
  } else {
    namespace rt = ddp::runtime;
    const std::string host = rt::required_env("MASTER_ADDR");
    const int port = rt::required_env_int("MASTER_PORT", 1, 65535);
    runner.rank = rt::required_env_int("RANK", 0, 1 << 20);
    runner.size = rt::required_env_int("WORLD_SIZE", 1, 1 << 20);
    direct = std::make_unique<ddp::bench::GlooDirect>(
        host, port, runner.rank, runner.size, rt::local_address_toward(host, port), o.algorithm);
    runner.all_reduce = [&direct](float* data, std::size_t count) {
      direct->all_reduce_sum(data, count);
    };
    runner.barrier = [&direct] {  // a one-element all_reduce is a barrier
      float one = 0;
      direct->all_reduce_sum(&one, 1);
    };
  }
  bool all_correct = true;
  for (std::size_t bytes : sizes) {
    if (bytes < sizeof(float)) continue;
    all_correct = run_size(runner, o, bytes) && all_correct;
  }
  return all_correct ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"all_reduce bus bandwidth per size (float32 sum); run under ddprun"};
  app.add_option("--sizes", o.sizes, "A..B (every power of --factor) or a comma list; K/M/G suffixes")
      ->capture_default_str();
  app.add_option("--factor", o.factor, "step of an A..B range")->capture_default_str();
  app.add_option("--mode", o.mode, "ddp (libddp) or gloo (Gloo called directly, the baseline)")
      ->check(CLI::IsMember({"ddp", "gloo"}))->capture_default_str();
  app.add_option("--algorithm", o.algorithm, "ring, bcube, or (--mode ddp) shm or auto")
      ->check(CLI::IsMember({"ring", "bcube", "shm", "auto"}))->capture_default_str();
  app.add_option("--iters", o.iters, "timed iterations per size (default: by size, 5..200)");
  app.add_option("--warmup", o.warmup, "untimed iterations per size")->capture_default_str();
  app.add_flag("--json", o.json, "one JSON object per size");
  app.add_flag("--check", o.check, "verify every result; exit 1 on a wrong one");
  CLI11_PARSE(app, argc, argv);
  if (o.mode == "gloo" && (o.algorithm == "shm" || o.algorithm == "auto")) {
    std::fprintf(stderr, "ddp-bench-allreduce: --algorithm %s is libddp's; --mode gloo takes ring "
                 "or bcube\n", o.algorithm.c_str());
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
