"""A real PyTorch DDP script (gloo, CPU) under ddprun, 2 and 4 workers, /usr/bin/python3:
init_process_group("env://") through the agent's store, training, all_reduce, rank 0 checkpoint."""
import os

import agenttest
import ddptest


def run(tmp, nproc):
    out = os.path.join(tmp, f"n{nproc}"); os.mkdir(out)
    result = ddptest.run([agenttest.ddprun(), "--python", ddptest.TORCH_PYTHON,
                          f"--nproc_per_node={nproc}", agenttest.worker("torch_ddp_train.py"), out,
                          "--steps", "5"], timeout=120)
    agenttest.expect_exit(result, 0, f"torch DDP with {nproc} workers")
    results = [agenttest.read_json(os.path.join(out, f"result_rank{r}.json")) for r in range(nproc)]
    for r, record in enumerate(results):
        ddptest.check(record["world_size"] == nproc and record["rank"] == r, f"rank {r}: {record}")
        ddptest.check(record["allreduce"] == sum(range(nproc)), f"all_reduce: {record}")
        ddptest.check(record["params"] == results[0]["params"], "parameters differ across ranks")
    ddptest.check(os.path.getsize(os.path.join(out, "checkpoint.pt")) > 0, "no checkpoint")


def main():
    ddptest.require_torch()
    tmp = ddptest.temp_dir()
    try:
        run(tmp, 2)
        run(tmp, 4)
    finally:
        ddptest.remove_tree(tmp)


if __name__ == "__main__":
    main()
    print("ok")
