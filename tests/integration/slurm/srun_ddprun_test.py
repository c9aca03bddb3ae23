"""The real ddprun under srun on a 2-node SLURM cluster, with no rendezvous flags at all:
`srun -N2 --ntasks-per-node=1 ddprun --nproc_per_node=2 store_peer.py` gives ranks 0..3 once
each, WORLD_SIZE 4, node_rank = SLURM_NODEID, MASTER_ADDR = the first node and one MASTER_PORT,
and the workers of both nodes meet in that store. Then a worker exiting 3 on node 1: the srun step
fails, ddprun's failure report names the rank, and nothing is left running."""
import glob
import json
import os
import sys
import uuid

import ddptest
import slurmtest
from ddptest import check

NPROC = 2


def srun_ddprun(name, tag, out_dir, worker_args, timeout, extra_env=None):
    exports = ",".join(["ALL", f"DDP_TEST_TAG={tag}"] +
                       [f"{k}={v}" for k, v in (extra_env or {}).items()])
    # Why --export instead of env=: the marker must reach the tasks but not srun itself, so that
    # processes_with_env() finds only ddprun and its workers.
    return slurmtest.slurm(["srun", "-N2", "--ntasks-per-node=1", "-J", name, f"--export={exports}",
                            ddptest.bin_path("ddprun"), f"--nproc_per_node={NPROC}",
                            "--python", sys.executable, f"--log_dir={out_dir}/logs",
                            "--log_level=info"] + worker_args,  # the SLURM summary is an info line
                           timeout=timeout)


def check_launch(out_dir):
    tag = str(uuid.uuid4())
    run = srun_ddprun("ddpsl-launch", tag, out_dir,
                      [os.path.join(slurmtest.HERE, "store_peer.py"), out_dir], timeout=60)
    check(run.returncode == 0, f"srun exited {run.returncode}\n{run.stdout}\n{run.stderr}")
    records = [json.load(open(f)) for f in glob.glob(os.path.join(out_dir, "peer_rank*.json"))]
    ranks = sorted(int(r["env"]["RANK"]) for r in records)
    check(ranks == [0, 1, 2, 3], f"ranks {ranks} (each of 0..3 exactly once)\n{run.stderr}")
    job = records[0]["env"]["SLURM_JOB_ID"]
    port = str(20000 + int(job) % 10000)
    hosts = []
    for r in records:
        env, rank = r["env"], int(r["env"]["RANK"])
        check(env["WORLD_SIZE"] == "4", f"rank {rank}: WORLD_SIZE {env['WORLD_SIZE']}")
        check(env["GROUP_RANK"] == env["SLURM_NODEID"],
              f"rank {rank}: GROUP_RANK {env['GROUP_RANK']} but SLURM_NODEID {env['SLURM_NODEID']}")
        check(r["host"] == f"ddpslurm{env['SLURM_NODEID']}", f"rank {rank} ran on {r['host']}")
        check(rank == int(env["GROUP_RANK"]) * NPROC + int(env["LOCAL_RANK"]),
              f"rank {rank}: GROUP_RANK {env['GROUP_RANK']} LOCAL_RANK {env['LOCAL_RANK']}")
        check(env["MASTER_ADDR"] == "ddpslurm0" and env["MASTER_PORT"] == port,
              f"rank {rank}: store {env['MASTER_ADDR']}:{env['MASTER_PORT']}, "
              f"expected ddpslurm0:{port}")
        check(env["TORCHELASTIC_RUN_ID"] == f"slurm-{job}.0",
              f"run id {env['TORCHELASTIC_RUN_ID']}")
        hosts.append(r["host"])
    peers = ["ddpslurm0", "ddpslurm0", "ddpslurm1", "ddpslurm1"]
    for r in records:
        check(r["peers"] == peers,
              f"rank {r['env']['RANK']} saw peers {r['peers']}, expected {peers}")
    check(sorted(r["joined"] for r in records) == [1, 2, 3, 4], "the store's counter saw 4 workers")
    for node in (0, 1):
        summary = f"SLURM job {job} step 0: nnodes=2 node_rank={node} master=ddpslurm0:{port}"
        check(summary in run.stderr, f"launch log of node {node}:\n{run.stderr}")
    slurmtest.wait_gone(f"DDP_TEST_TAG={tag}", timeout=10)


def check_failure(out_dir):
    """Rank 2 (node 1, local rank 0) exits 3; the healthy ranks would sleep 60 s."""
    tag = str(uuid.uuid4())
    run = srun_ddprun("ddpsl-fail", tag, out_dir,
                      [os.path.join(slurmtest.WORKERS, "fail_once.py"), out_dir, "--rank", "2",
                       "--code", "3", "--always", "--lines", "2"],
                      timeout=60, extra_env={"DDP_TEST_HEALTHY_SECONDS": "60"})
    report = f"srun exit {run.returncode}\n--- stdout\n{run.stdout}\n--- stderr\n{run.stderr}"
    # srun's rule: the step's exit code is the highest of its tasks' (node 1: 3, node 0: 1).
    check(run.returncode == 3, f"the srun step must exit 3\n{report}")
    check("rank      : 2 (local_rank: 0)" in run.stderr and "exitcode  : 3" in run.stderr,
          f"the failure report must name rank 2 and exit code 3\n{report}")
    check("host      : ddpslurm1" in run.stderr, f"the report must name node 1's host\n{report}")
    check("task 1: Exited with exit code 3" in run.stderr, f"srun names the failed task\n{report}")
    slurmtest.wait_gone(f"DDP_TEST_TAG={tag}", timeout=10)
    print(report)


def main():
    slurmtest.require_slurm()
    work = ddptest.temp_dir("ddpslurm_")
    try:
        with slurmtest.cluster(2):
            os.mkdir(os.path.join(work, "launch"))
            check_launch(os.path.join(work, "launch"))
            os.mkdir(os.path.join(work, "fail"))
            check_failure(os.path.join(work, "fail"))
    finally:
        ddptest.remove_tree(work)
    print("OK")


if __name__ == "__main__":
    main()
