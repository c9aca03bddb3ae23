"""The soak's job: a real PyTorch DDP (gloo, CPU) worker that trains step by step and leaves the
records the soak checks (scripts/bench/soak/soak.py).

Restart mode (default): rank 0 checkpoints every --checkpoint steps (DIR/checkpoint.pt, atomic);
a new worker resumes from it. In-process mode (--elastic): the loop runs under `ddprun.elastic`
(a commit every step); a re-form re-enters `train` with the last commit.

Records, appended as JSON lines (O_APPEND, one write a line, so lines never interleave):
  DIR/starts.jsonl  each entry into training: t, pid, rank, world, restart_count, node, step (the
                    step it resumes at), checkpoint (the checkpoint's step; restart mode)
  DIR/steps.jsonl   rank 0, each completed step: t, step, world, pid, entered (when this process
                    entered its current group: the soak's recovery marks)
  DIR/checkpoints.jsonl  rank 0, each checkpoint written (restart mode): t, step
  DIR/checks.jsonl  rank 0, every --check steps: step, world, lo, hi (min and max over the ranks
                    of the parameters' float64 checksum; equal when every rank holds the same)
Faults on request: DIR/fail_<pid> makes that worker exit 3 at its next step.
It trains until DIR/stop exists (agreed on by an all_reduce every 10 steps).

Usage: soak_worker.py DIR [--elastic] [--checkpoint 20] [--check 5] [--sleep 0.05]
"""
import datetime
import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

out_dir = sys.argv[1]
elastic_mode = "--elastic" in sys.argv


def arg(name, default):
    return type(default)(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


checkpoint_every, check_every, pause = arg("--checkpoint", 20), arg("--check", 5), arg("--sleep", 0.05)
CHECKPOINT = os.path.join(out_dir, "checkpoint.pt")


def append(name, doc):
    fd = os.open(os.path.join(out_dir, name), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(doc) + "\n").encode())
    finally:
        os.close(fd)


def checksum(model):
    total = torch.zeros(1, dtype=torch.float64)
    for p in model.parameters():
        total += p.detach().double().sum()
    lo, hi = total.clone(), total.clone()
    dist.all_reduce(lo, op=dist.ReduceOp.MIN)
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    return lo.item(), hi.item()


def should_stop():
    flag = torch.tensor([1.0 if os.path.exists(os.path.join(out_dir, "stop")) else 0.0])
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return flag.item() > 0


def train_steps(model, optimizer, first_step, on_step):
    """Trains from first_step until DIR/stop; on_step(step) after each completed step."""
    entered = time.time()
    rank, world = dist.get_rank(), dist.get_world_size()
    ddp = DistributedDataParallel(model)
    generator = torch.Generator().manual_seed(1000 * first_step + rank)
    fail_file = os.path.join(out_dir, f"fail_{os.getpid()}")
    step = first_step
    while True:
        if step % 10 == 0 and should_stop():
            return step
        if os.path.exists(fail_file):
            print(f"soak_worker rank={rank} pid={os.getpid()} exits 3 on request", flush=True)
            os._exit(3)
        x = torch.randn(32, 16, generator=generator)
        loss = ((ddp(x) - x.sum(dim=1, keepdim=True)) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        if step % check_every == 0:
            lo, hi = checksum(model)
            if rank == 0:
                append("checks.jsonl", {"step": step, "world": world, "lo": lo, "hi": hi})
        if rank == 0:
            append("steps.jsonl", {"t": time.time(), "step": step, "world": world,
                                   "pid": os.getpid(), "entered": entered})
        on_step(step)
        time.sleep(pause)


def make_model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    return model, torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9)


def start_record(step, extra=None):
    doc = {"t": time.time(), "pid": os.getpid(), "rank": dist.get_rank(),
           "world": dist.get_world_size(),
           "restart_count": int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")),
           "node": int(os.environ.get("GROUP_RANK", "0")), "step": step,
           "master_addr": os.environ.get("MASTER_ADDR", "")}
    doc.update(extra or {})
    append("starts.jsonl", doc)


def run_restart_mode():
    dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=60))
    model, optimizer = make_model()
    step = 0
    if os.path.exists(CHECKPOINT):
        saved = torch.load(CHECKPOINT)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        step = saved["step"]
    start_record(step, {"checkpoint": step})

    def on_step(done):
        if dist.get_rank() == 0 and done % checkpoint_every == 0:
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                        "step": done}, CHECKPOINT + ".tmp")
            os.replace(CHECKPOINT + ".tmp", CHECKPOINT)
            append("checkpoints.jsonl", {"t": time.time(), "step": done})

    train_steps(model, optimizer, step, on_step)
    dist.destroy_process_group()


def run_elastic_mode():
    import ddprun.elastic as elastic

    model, optimizer = make_model()
    state = elastic.TorchState(model=model, optimizer=optimizer, step=0)

    @elastic.run
    def train(state):
        start_record(state.step)

        def on_step(done):
            state.step = done
            state.commit()

        train_steps(state.model, state.optimizer, state.step, on_step)

    train(state)


if elastic_mode:
    run_elastic_mode()
else:
    run_restart_mode()
