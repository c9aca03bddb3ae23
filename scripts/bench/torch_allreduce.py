"""PyTorch 1.13's gloo all_reduce on the sizes ddp-bench-allreduce uses, for scripts/bench/allreduce.sh.

Run on every rank under a launcher (MASTER_ADDR, RANK, ... set) by /usr/bin/python3. Same
iteration counts and timing as ddp-bench-allreduce (float32 sum, in place, each iteration's time
recorded; mean and median), rank 0 prints one JSON object per size.

usage: torch_allreduce.py SIZE_BYTES...
"""

import json
import statistics
import sys
import time

import torch
import torch.distributed as dist


def iterations_for(size):
    return max(5, min(200, (512 << 20) // size))


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    for size in map(int, sys.argv[1:]):
        data = torch.zeros(size // 4, dtype=torch.float32)
        for _ in range(2):
            dist.all_reduce(data)
        iters = iterations_for(size)
        dist.barrier()
        times = []
        for _ in range(iters):
            start = time.perf_counter()
            dist.all_reduce(data)
            times.append(time.perf_counter() - start)
        seconds = sum(times) / iters
        algbw = size / seconds / 1e9
        if rank == 0:
            print(json.dumps({"version": 1, "benchmark": "allreduce", "mode": "torch",
                              "algorithm": "gloo-default", "dtype": "float32", "op": "sum",
                              "world_size": world, "size_bytes": size, "iters": iters,
                              "time_us": seconds * 1e6,
                              "time_us_median": statistics.median(times) * 1e6,
                              "algbw_gbps": algbw,
                              "busbw_gbps": algbw * 2 * (world - 1) / world}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
