"""srun and sbatch on a real SLURM cluster (scripts/slurm/cluster-up.sh, 2 namespace nodes):
detection in each srun task, the one clear error for several tasks per node, and a batch script
(single-node defaults outside srun, full detection in its srun step)."""
import os

import ddptest
import slurmtest

ENV = slurmtest.ENV


def check_batch_script(probe):
    work = ddptest.temp_dir("ddpslurm_")
    try:
        script = os.path.join(work, "job.sh")
        with open(script, "w") as f:
            f.write(f"#!/bin/bash\n{probe}\nsrun {probe}\n")
        out = os.path.join(work, "out.txt")
        job = ddptest.run(["sbatch", "--parsable", "-N2", "--ntasks-per-node=1", "-o", out, script],
                          timeout=30, env=ENV, check_rc=0).stdout.strip()
        # Poll squeue, never `sbatch --wait` (it returns tens of seconds after the job ends).
        gone = ddptest.wait_until(lambda: ddptest.run(["squeue", "-h", "-j", job], env=ENV).stdout.strip() == "",
                                  timeout=60, interval=0.1)
        ddptest.check(gone, f"sbatch job {job} did not finish")
        lines = open(out).read().split("\n")
        ddptest.check(lines[0] == f"nnodes=1 node_rank=0 master_addr=127.0.0.1 master_port={20000 + int(job) % 10000} run_id=slurm-{job}",
                      f"batch step (no srun) must be single-node: {lines}")
        step = sorted(line for line in lines[1:] if line)
        ddptest.check(len(step) == 2 and all("nnodes=2" in l and f"run_id=slurm-{job}.0" in l for l in step),
                      f"srun step inside the batch script: {lines}")
    finally:
        ddptest.remove_tree(work)


def main():
    slurmtest.require_slurm()
    probe = ddptest.bin_path("slurm-probe")
    with slurmtest.cluster(2):
        one = ddptest.run(["srun", "-N2", "--ntasks-per-node=1", probe], timeout=30, env=ENV, check_rc=0)
        lines = sorted(one.stdout.split("\n")[:-1])
        ddptest.check(len(lines) == 2, f"two srun tasks expected, got {one.stdout!r}")
        ranks = sorted(line.split()[1] for line in lines)
        ddptest.check(ranks == ["node_rank=0", "node_rank=1"], f"node ranks: {lines}")
        for line in lines:
            ddptest.check("nnodes=2" in line and "master_addr=ddpslurm0" in line, f"detected: {line}")
        ports = {line.split()[3] for line in lines}
        ddptest.check(len(ports) == 1, f"every node must derive the same port: {lines}")

        two = ddptest.run(["srun", "-N2", "--ntasks-per-node=2", probe], timeout=30, env=ENV)
        ddptest.check(two.returncode != 0, "several tasks per node must fail")
        ddptest.check("srun started 2 ddprun tasks on this node" in two.stderr, f"error: {two.stderr!r}")
        ddptest.check("--ntasks-per-node=1" in two.stderr, f"error names the fix: {two.stderr!r}")

        check_batch_script(probe)
    print("OK")


if __name__ == "__main__":
    main()
