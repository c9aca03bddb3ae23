#include <catch2/catch.hpp>

#include "agent/slurm/slurm.hpp"
#include "ddp/error.hpp"

using ddp::agent::detect_slurm;
using Env = std::map<std::string, std::string>;

namespace {
// Why not env[key] = "literal": GCC 12 at -O2 reports a false -Wrestrict on that assignment.
void set(Env& env, const std::string& key, std::string value) {
  env.insert_or_assign(key, std::move(value));
}

Env srun_env() {
  return {{"SLURM_JOB_ID", "4242"},           {"SLURM_STEP_ID", "0"},
          {"SLURM_STEP_NUM_NODES", "2"},      {"SLURM_NODEID", "1"},
          {"SLURM_STEP_NODELIST", "gpu[07-08]"}, {"SLURM_JOB_NODELIST", "gpu[01-08]"},
          {"SLURM_STEP_TASKS_PER_NODE", "1(x2)"}, {"SLURM_NTASKS", "2"},
          {"SLURM_LOCALID", "0"}};
}
}  // namespace

TEST_CASE("slurm: no SLURM_JOB_ID means no detection") {
  CHECK_FALSE(detect_slurm({{"PATH", "/bin"}}).has_value());
}

TEST_CASE("slurm: one srun task per node fills every default") {
  auto d = detect_slurm(srun_env());
  REQUIRE(d.has_value());
  CHECK(d->nnodes == 2);
  CHECK(d->node_rank == 1);
  CHECK(d->master_addr == "gpu07");
  CHECK(d->master_port == 20000 + 4242);
  CHECK(d->run_id == "slurm-4242.0");
  CHECK(d->summary.find("nnodes=2") != std::string::npos);
}

TEST_CASE("slurm: the port is the same on every node and stays in range") {
  Env a = srun_env();
  Env b = srun_env();
  set(b, "SLURM_NODEID", "0");
  set(a, "SLURM_JOB_ID", "123456789");
  set(b, "SLURM_JOB_ID", "123456789");
  CHECK(detect_slurm(a)->master_port == detect_slurm(b)->master_port);
  CHECK(detect_slurm(a)->master_port == 20000 + 6789);
}

TEST_CASE("slurm: falls back to SLURM_NNODES and the job nodelist") {
  Env env = srun_env();
  env.erase("SLURM_STEP_NUM_NODES");
  env.erase("SLURM_STEP_NODELIST");
  set(env, "SLURM_NNODES", "8");
  set(env, "SLURM_NTASKS", "8");
  env.erase("SLURM_STEP_TASKS_PER_NODE");
  auto d = detect_slurm(env);
  CHECK(d->nnodes == 8);
  CHECK(d->master_addr == "gpu01");
}

TEST_CASE("slurm: several tasks per node is one clear error") {
  Env env = srun_env();
  set(env, "SLURM_STEP_TASKS_PER_NODE", "4(x2)");
  set(env, "SLURM_NTASKS", "8");
  try {
    detect_slurm(env);
    FAIL("expected ConfigError");
  } catch (const ddp::ConfigError& e) {
    std::string what = e.what();
    CHECK(what.find("srun started 4 ddprun tasks on this node") != std::string::npos);
    CHECK(what.find("--ntasks-per-node=1") != std::string::npos);
  }
  Env local = srun_env();
  set(local, "SLURM_LOCALID", "1");
  CHECK_THROWS_AS(detect_slurm(local), ddp::ConfigError);
}

TEST_CASE("slurm: a batch script without srun is a single-node job") {
  Env env = {{"SLURM_JOB_ID", "77"}, {"SLURM_JOB_NODELIST", "n[1-4]"}, {"SLURM_NNODES", "4"},
             {"SLURM_NTASKS", "4"}};
  auto d = detect_slurm(env);
  REQUIRE(d.has_value());
  CHECK(d->nnodes == 1);
  CHECK(d->node_rank == 0);
  CHECK(d->master_addr == "127.0.0.1");
  CHECK(d->run_id == "slurm-77");
}

TEST_CASE("slurm: a non-numeric job id is a ConfigError naming the variable") {
  Env env = srun_env();
  set(env, "SLURM_JOB_ID", "abc");
  CHECK_THROWS_WITH(detect_slurm(env), Catch::Contains("SLURM_JOB_ID"));
}
