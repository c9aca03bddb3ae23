"""A batch job running real PyTorch DDP (gloo, /usr/bin/python3) on 2 nodes x 2 workers through
`srun ddprun` with no rendezvous flags: the job completes with exit 0, the all_reduce of the ranks
gives 0+1+2+3, every rank ends with the same parameters, and those parameters and each rank's
loss match the same training done in one process; rank 0 saved a checkpoint. The job is polled
with scontrol, never `sbatch --wait`."""
import glob
import json
import math
import os

import ddptest
import slurmtest
from ddptest import check

WORLD, STEPS = 4, 5


def reference(steps):
    """torch_ddp_train.py's run done in one process: DDP averages the ranks' gradients, which
    equals one SGD step on the mean of the ranks' losses. Returns (final parameters, each rank's
    last loss)."""
    import torch
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    generators = [torch.Generator().manual_seed(rank) for rank in range(WORLD)]
    for _ in range(steps):
        xs = [torch.randn(16, 8, generator=g) for g in generators]
        losses = [((model(x) - x.sum(dim=1, keepdim=True)) ** 2).mean() for x in xs]
        optimizer.zero_grad()
        (sum(losses) / WORLD).backward()
        optimizer.step()
    params = torch.cat([p.detach().flatten() for p in model.parameters()]).tolist()
    return params, [loss.item() for loss in losses]


def main():
    slurmtest.require_slurm()
    ddptest.require_torch()
    ddprun = ddptest.bin_path("ddprun")
    work = ddptest.temp_dir("ddpslurm_")
    try:
        with slurmtest.cluster(2):
            script = os.path.join(work, "job.sbatch")
            worker = os.path.join(slurmtest.WORKERS, "torch_ddp_train.py")
            with open(script, "w") as f:
                f.write("#!/bin/bash\n"
                        "#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n#SBATCH --time=5\n"
                        f"srun {ddprun} --nproc_per_node=2 --python {ddptest.TORCH_PYTHON} "
                        f"--log_dir={work}/logs "
                        f"{worker} {work} --steps {STEPS}\n")
            out = os.path.join(work, "job.out")
            job = slurmtest.slurm(["sbatch", "--parsable", "-o", out, script],
                                  check_rc=0).stdout.strip()
            state, exit_code = slurmtest.wait_job_end(job, timeout=90)
            log = open(out).read() if os.path.exists(out) else "<no output file>"
            check(state == "COMPLETED" and exit_code == "0:0",
                  f"job {job}: JobState={state} ExitCode={exit_code}\n{log}")
            results = [json.load(open(p))
                       for p in glob.glob(os.path.join(work, "result_rank*.json"))]
            check(sorted(r["rank"] for r in results) == [0, 1, 2, 3], f"results {results}\n{log}")
            params, losses = reference(STEPS)
            for r in results:
                check(r["world_size"] == WORLD and r["allreduce"] == 6.0, f"rank {r['rank']}: {r}")
                check(r["params"] == results[0]["params"], f"rank {r['rank']}: parameters differ")
                close = all(math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-5)
                            for a, b in zip(r["params"], params))
                check(close, f"rank {r['rank']}: parameters {r['params']}, "
                             f"single-process reference {params}")
                check(math.isclose(r["loss"], losses[r["rank"]], rel_tol=1e-4),
                      f"rank {r['rank']}: loss {r['loss']}, reference {losses[r['rank']]}")
            check(os.path.exists(os.path.join(work, "checkpoint.pt")), "rank 0 saved no checkpoint")
            print(f"job {job}: {state} {exit_code}; losses "
                  f"{[round(r['loss'], 4) for r in sorted(results, key=lambda r: r['rank'])]}")
    finally:
        ddptest.remove_tree(work)
    print("OK")


if __name__ == "__main__":
    main()
