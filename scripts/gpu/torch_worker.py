"""A real PyTorch worker for scripts/gpu/check.sh, run under ddprun: init_process_group(BACKEND)
from the launcher's environment, then all_reduce, broadcast and barrier with checked results (on
GPU LOCAL_RANK for nccl). Each rank prints one line `worker rank=R world=W backend=B torch=V ok`."""

import os
import sys

import torch
import torch.distributed as dist


def main():
    backend = sys.argv[1]
    dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cpu")
    if backend == "nccl":
        device = torch.device(f"cuda:{int(os.environ['LOCAL_RANK'])}")
        torch.cuda.set_device(device)
    t = torch.full((1024,), float(rank + 1), device=device)
    dist.all_reduce(t)
    expected = world * (world + 1) / 2
    assert torch.all(t == expected).item(), f"all_reduce gave {t[0].item()}, not {expected}"
    b = torch.full((16,), float(rank), device=device)
    dist.broadcast(b, src=0)
    assert torch.all(b == 0).item(), "broadcast from rank 0 did not arrive"
    dist.barrier()
    print(f"worker rank={rank} world={world} backend={backend} torch={torch.__version__} ok",
          flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
