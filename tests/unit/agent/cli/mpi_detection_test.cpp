// Issue 33: mpirun detection. Each MPI task is one agent: its node rank the task's rank, the node
// count the task count, the master address 127.0.0.1 on one host or mpirun's host across hosts.
// The environments are those OpenMPI 4.1 sets (captured from Debian's openmpi-bin).

#include <catch2/catch.hpp>
#include <sstream>

#include "agent/cli/dry_run.hpp"
#include "agent/mpi/mpi.hpp"
#include "ddp/error.hpp"
#include "tests/unit/agent/cli/cli_test_util.hpp"

namespace ddp::agent {
namespace {

using test::Env;
using test::parse;

constexpr const char* kHnp = "1364721664.0;tcp://192.0.2.2,10.0.0.1:39781;tcp6://[fd00::2]:53411";

Env mpi_env(int rank, int size, int local_size) {
  return {{"OMPI_COMM_WORLD_RANK", std::to_string(rank)},
          {"OMPI_COMM_WORLD_SIZE", std::to_string(size)},
          {"OMPI_COMM_WORLD_LOCAL_SIZE", std::to_string(local_size)},
          {"OMPI_MCA_ess_base_jobid", "1364721665"},
          {"OMPI_MCA_orte_hnp_uri", kHnp},
          {"OMPI_MCA_orte_local_daemon_uri", kHnp}};
}

TEST_CASE("mpirun tasks on one host become nodes of a static job", "[cli][mpi]") {
  const auto config = parse({"--nproc_per_node=2", "train.py"}, mpi_env(1, 3, 3));
  REQUIRE(config.mpi);
  CHECK(config.nnodes_max == 3);
  CHECK(config.node_rank == 1);
  CHECK(config.master_addr == "127.0.0.1");
  CHECK(config.master_port == 20000 + 1364721665 % 10000);
  CHECK(config.rdzv_id == "mpi-1364721665");
  CHECK(config.rdzv_backend == "static");
  CHECK(config.source_of("node_rank") == ValueSource::kMpi);
  CHECK_FALSE(config.slurm);
}

TEST_CASE("across hosts the master is mpirun's host, where task 0 must run", "[cli][mpi]") {
  Env env = mpi_env(1, 2, 1);
  CHECK(parse({"train.py"}, env).master_addr == "192.0.2.2");
  env = mpi_env(0, 2, 1);
  CHECK(parse({"train.py"}, env).master_addr == "192.0.2.2");  // task 0 with mpirun: fine
  env["OMPI_MCA_orte_local_daemon_uri"] = "1364721664.1;tcp://192.0.2.3:40000";
  CHECK_THROWS_WITH(parse({"train.py"}, env),
                    Catch::StartsWith("mpirun: task 0 does not run on mpirun's host (192.0.2.2)"));
  CHECK(parse({"--master_addr=node7", "train.py"}, env).master_addr == "node7");
  SECTION("a launcher that does not say (OpenMPI 5) needs --master_addr") {
    env.erase("OMPI_MCA_orte_hnp_uri");
    CHECK_THROWS_WITH(parse({"train.py"}, env),
                      Catch::StartsWith("mpirun across hosts: the launcher does not say"));
    CHECK(parse({"--master_addr=node7", "train.py"}, env).nnodes_max == 2);
  }
}

TEST_CASE("flags win over mpirun, --no_mpi ignores it, and mpirun wins over SLURM",
          "[cli][mpi]") {
  Env env = mpi_env(2, 4, 4);
  CHECK(parse({"--nnodes=4", "--node_rank=3", "train.py"}, env).node_rank == 3);
  const auto off = parse({"--no_mpi", "train.py"}, env);
  CHECK_FALSE(off.mpi);
  CHECK(off.nnodes_max == 1);
  CHECK_FALSE(parse({"train.py"}, Env{{"PET_NO_MPI", "1"}, {"OMPI_COMM_WORLD_RANK", "0"},
                                      {"OMPI_COMM_WORLD_SIZE", "2"}})
                  .mpi);
  Env slurm{{"SLURM_JOB_ID", "77"}, {"SLURM_STEP_ID", "0"}, {"SLURM_NODEID", "0"},
             {"SLURM_STEP_NUM_NODES", "1"}};
  env.merge(slurm);
  const auto both = parse({"train.py"}, env);
  CHECK(both.mpi);
  CHECK_FALSE(both.slurm);
  CHECK(both.node_rank == 2);
}

TEST_CASE("bad mpirun variables name the variable", "[cli][mpi]") {
  CHECK_THROWS_WITH(parse({"s.py"}, Env{{"OMPI_COMM_WORLD_RANK", "x"},
                                        {"OMPI_COMM_WORLD_SIZE", "2"}}),
                    Catch::StartsWith("OMPI_COMM_WORLD_RANK='x': expected an integer"));
  CHECK_THROWS_WITH(parse({"s.py"}, Env{{"OMPI_COMM_WORLD_RANK", "2"},
                                        {"OMPI_COMM_WORLD_SIZE", "2"}}),
                    "OMPI_COMM_WORLD_RANK=2 is not below OMPI_COMM_WORLD_SIZE=2");
  CHECK_FALSE(detect_mpi(Env{{"OMPI_COMM_WORLD_RANK", "0"}}));  // half an mpirun: not one
}

TEST_CASE("the dry run shows the mpirun detection", "[cli][mpi]") {
  const auto config = parse({"--dry_run", "--no_python", "true"}, mpi_env(0, 2, 2));
  std::ostringstream out;
  print_dry_run(config, mpi_env(0, 2, 2), out);
  CHECK_THAT(out.str(), Catch::Contains("mpirun task 0 of 2 (one host)"));
  CHECK_THAT(out.str(), Catch::Contains("(mpirun)"));
}

}  // namespace
}  // namespace ddp::agent
