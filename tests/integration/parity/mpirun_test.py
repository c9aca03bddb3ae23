"""Issue 33: `mpirun -np N ddprun ...` needs nothing filled in. With Debian's openmpi-bin on one
host: two tasks, each an agent with two workers, make one job of four ranks (node rank = task
rank, run id from mpirun's job id); --no_mpi ignores mpirun. Real PyTorch workers under mpirun
run across two nodes in mpirun_netns_test.py."""
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "agent"))
import agenttest  # noqa: E402
import ddptest  # noqa: E402
from ddptest import check  # noqa: E402

# As root, OpenMPI refuses to start without these two.
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def mpirun(np, args, timeout=120):
    return ddptest.run(["mpirun", "--oversubscribe", "-np", str(np), agenttest.ddprun()] + args,
                       timeout=timeout, env=MPI_ENV)


def two_tasks(work):
    out = os.path.join(work, "env")
    os.makedirs(out)
    result = mpirun(2, ["--nproc_per_node=2", "--python", agenttest.PYTHON,
                        agenttest.worker("env_dump.py"), out])
    agenttest.expect_exit(result, 0, "mpirun -np 2 ddprun --nproc_per_node=2")
    records = agenttest.env_dumps(out, attempt=0)
    check(sorted(records) == [0, 1, 2, 3], f"ranks {sorted(records)}")
    run_ids = {r["env"]["TORCHELASTIC_RUN_ID"] for r in records.values()}
    check(len(run_ids) == 1 and next(iter(run_ids)).startswith("mpi-"), f"run ids {run_ids}")
    for rank, record in records.items():
        env = record["env"]
        check(env["WORLD_SIZE"] == "4" and env["GROUP_WORLD_SIZE"] == "2"
              and env["GROUP_RANK"] == str(rank // 2) and env["LOCAL_RANK"] == str(rank % 2),
              f"rank {rank}: {dict((k, env[k]) for k in ('WORLD_SIZE', 'GROUP_RANK'))}")
    print("ok mpirun -np 2: one job of 2 nodes x 2 workers, run id", next(iter(run_ids)))

    alone = os.path.join(work, "alone")
    os.makedirs(alone)
    result = mpirun(1, ["--no_mpi", "--nproc_per_node=2", "--python", agenttest.PYTHON,
                        agenttest.worker("env_dump.py"), alone])
    agenttest.expect_exit(result, 0, "--no_mpi")
    records = agenttest.env_dumps(alone, attempt=0)
    check(sorted(records) == [0, 1] and not records[0]["env"]["TORCHELASTIC_RUN_ID"]
          .startswith("mpi-"), "--no_mpi still used mpirun's variables")
    print("ok --no_mpi ignores mpirun")


def main():
    ddptest.require(shutil.which("mpirun") is not None,
                    "mpirun missing (apt-get install openmpi-bin)")
    work = ddptest.temp_dir()
    try:
        two_tasks(work)
    finally:
        ddptest.remove_tree(work)


if __name__ == "__main__":
    main()
