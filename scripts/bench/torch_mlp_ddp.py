"""PyTorch DDP reference (1.13 or 2.x) for scripts/bench/trainer_vs_pytorch.sh and
scripts/gpu/check.sh: the same MLP, data, normalization, sampler, batch size and optimizer as
ddp-train, on CPU with gloo (--device cpu) or on GPU LOCAL_RANK with nccl (--device cuda, which
needs a PyTorch built with CUDA; Debian's is not), FP32 without TF32 as ddp-train's CUDA engine.
Launched by torchrun; rank 0 prints a summary line in ddp-train's format (test_accuracy=,
samples_per_s=) per batch size (--batch_sizes 64,256,... trains a fresh model for each in one
process group)."""

import argparse
import gzip
import os
import struct
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data.distributed import DistributedSampler


def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    dims = raw[3]
    shape = struct.unpack(f">{dims}I", raw[4:4 + 4 * dims])
    return torch.frombuffer(bytearray(raw[4 + 4 * dims:]), dtype=torch.uint8).reshape(shape)


def load(data, split):
    x = read_idx(f"{data}/{split}-images-idx3-ubyte.gz").reshape(-1, 784).float()
    y = read_idx(f"{data}/{split}-labels-idx1-ubyte.gz").long()
    return (x / 255.0 - 0.2860) / 0.3530, y


def train(args, device, cuda, rank, world, batch_size, data):
    """One fresh model trained for args.epochs at batch_size; rank 0 prints the summary line."""
    x, y, tx, ty = data
    torch.manual_seed(args.seed)
    net = torch.nn.Sequential(torch.nn.Linear(784, 1024), torch.nn.ReLU(),
                              torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                              torch.nn.Linear(1024, 10)).to(device)
    model = DDP(net, device_ids=[device.index] if cuda else None)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    sampler = DistributedSampler(range(len(y)), num_replicas=world, rank=rank, seed=args.seed)
    # As ddp-train: samples/s over the steps after the run's first, which pays one-time costs.
    train_s = 0.0
    samples = 0
    first_step = True
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        idx = torch.tensor(list(sampler), device=device)
        start = time.perf_counter()
        for b in range(0, len(idx), batch_size):
            sel = idx[b:b + batch_size]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x[sel]), y[sel])
            loss.backward()
            opt.step()
            if first_step:
                if cuda:
                    torch.cuda.synchronize(device)
                start = time.perf_counter()
                first_step = False
            else:
                samples += len(sel) * world
        if cuda:
            torch.cuda.synchronize(device)
        train_s += time.perf_counter() - start
        # Sharded evaluation, reduced over ranks, as ddp-train does.
        lo, hi = len(ty) * rank // world, len(ty) * (rank + 1) // world
        with torch.no_grad():
            correct = (model.module(tx[lo:hi]).argmax(1) == ty[lo:hi]).sum().float()
        dist.all_reduce(correct)
        accuracy = correct.item() / len(ty)
        if rank == 0:
            print(f"epoch={epoch + 1}/{args.epochs} done test_accuracy={accuracy:.4f} "
                  f"samples_per_s={samples / train_s:.1f}", flush=True)
    if rank == 0:
        print(f"summary epochs={args.epochs} world_size={world} batch_size={batch_size} "
              f"test_accuracy={accuracy:.4f} samples_per_s={samples / train_s:.1f} "
              f"train_s={train_s:.2f}", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch_size", type=int, default=64)
    p.add_argument("--batch_sizes", default="", help="comma list; overrides --batch_size")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    args = p.parse_args()

    cuda = args.device == "cuda"
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{os.environ.get('LOCAL_RANK', '0')}" if cuda else "cpu")
    if cuda:
        torch.cuda.set_device(device)
        torch.backends.cuda.matmul.allow_tf32 = False
    x, y = (t.to(device) for t in load(args.data, "train"))
    tx, ty = (t.to(device) for t in load(args.data, "t10k"))
    sizes = [int(b) for b in args.batch_sizes.split(",")] if args.batch_sizes else [args.batch_size]
    for batch_size in sizes:
        train(args, device, cuda, rank, world, batch_size, (x, y, tx, ty))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
