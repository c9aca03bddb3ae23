#pragma once
// mpirun auto-detection: what ddprun fills in when `mpirun -np N ddprun ...` started it. Each MPI
// task is one agent (one "node" of the job, several may share a host) that starts
// --nproc_per_node workers itself. Read from the variables OpenMPI 4 (ORTE) and OpenMPI 5 (PRRTE)
// set in every task; no MPI library is loaded.

#include <map>
#include <optional>
#include <string>

#include "agent/slurm/slurm.hpp"

namespace ddp::agent {

// The same fields SLURM detection fills, with the MPI task as the node:
// - nnodes: OMPI_COMM_WORLD_SIZE; node_rank: OMPI_COMM_WORLD_RANK;
// - master_addr: 127.0.0.1 when every task runs on this host (OMPI_COMM_WORLD_LOCAL_SIZE equals
//   the size); else the address of mpirun's host from OMPI_MCA_orte_hnp_uri (OpenMPI 4), where
//   task 0 must run; empty when the launcher does not say (OpenMPI 5 across hosts: give
//   --master_addr);
// - master_port: derived from the job id (OMPI_MCA_ess_base_jobid, else PMIX_NAMESPACE), as
// SLURM's;
// - run_id: "mpi-<job id>".
using MpiDefaults = SlurmDefaults;

// The defaults when OMPI_COMM_WORLD_SIZE and OMPI_COMM_WORLD_RANK are set in `env`; nullopt
// otherwise. Throws ConfigError naming the variable when one is not a number or out of range.
std::optional<MpiDefaults> detect_mpi(const std::map<std::string, std::string>& env);

// The check task 0 makes across hosts: true when this task runs where mpirun does (its local
// daemon is mpirun itself: OMPI_MCA_orte_local_daemon_uri equals OMPI_MCA_orte_hnp_uri), so
// the master address derived from mpirun's host is this task's own.
bool is_on_mpirun_host(const std::map<std::string, std::string>& env);

}  // namespace ddp::agent
