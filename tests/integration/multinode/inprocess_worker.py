"""Test and benchmark worker for --recovery=inprocess: a real PyTorch DDP job on CPU (gloo) that
trains through ddprun.elastic, one commit per step, with a SLEEP after each step, until DIR/stop
exists (agreed on by an all_reduce every step) or MAX_STEPS.

It prints "inprocess_worker: pid <PID> started" on stderr, and appends JSON lines to
DIR/records_n<NODE>_p<PID>.jsonl (times are time.time()):
  {"kind": "entry", ...}  each time train() is entered (after the group formed and the state
      synced): world, rank, round, commits, step, started (the process's start, before
      `import torch`), imported (after it), phases (below), and the CRC32 of the parameters' bytes all-reduced as min and max (equal:
      every rank holds the same bits)
  {"kind": "step", ...}   after each commit: world, rank, step (the step just committed)
Every record also holds time, pid, node and local_rank. An entry's phases are the times of this
process's way in (the join bench's breakdown): forked (the kernel's start of the process, to
10 ms), started, torch (`import torch` done), elastic (`import ddprun.elastic` done), called
(train() first called), place (the place taken from the agent), group (init_process_group
done), synced (the state sync done); the last three of the latest re-form.
--fail R:S makes rank R exit 3 before step S when TORCHELASTIC_RESTART_COUNT is 0.
--delay_newcomer S makes a process started again (TORCHELASTIC_RESTART_COUNT above 0) wait S
seconds before its first train() (before it connects to its agent's channel), so that a test can
end the round while that newcomer starts.
--delay_reform S makes a worker that re-forms (joins a group after its first) wait S seconds
after it took the place, before it connects to the round's store, so that a test can kill its
node while it re-forms and before its peers could have met it in the group.
--hold MOMENT:S makes the worker stop at MOMENT of step S until it is killed, having written its
pid to DIR/held_n<NODE> (a test kills the node then, so the kill lands exactly there):
  step     inside the step: after the forward pass, before the backward (whose gradient
           all_reduce the other ranks then wait in)
  commit   inside state.commit(): the commit counted, its snapshot not yet written
  between  between steps: after the commit and its record, before the next step

Usage: inprocess_worker.py DIR --node N [--sleep 0.05] [--max_steps 100000] [--fail R:S]
                           [--hold MOMENT:S] [--delay_newcomer S] [--delay_reform S]
"""
import time

STARTED = time.time()  # before `import torch`: the figure a joining worker is judged by

import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import zlib  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

TORCH_IMPORTED = time.time()

import ddprun.elastic as elastic  # noqa: E402

IMPORTED = time.time()  # torch and ddprun.elastic imported


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


out_dir = sys.argv[1]
node = int(arg("--node", "0"))
pause, max_steps = float(arg("--sleep", "0.05")), int(arg("--max_steps", "100000"))
fail = [int(v) for v in arg("--fail", "-1:-1").split(":")]
hold_moment, hold_step = arg("--hold", ":-1").split(":")
hold_step = int(hold_step)
delay_newcomer = float(arg("--delay_newcomer", "0"))
delay_reform = float(arg("--delay_reform", "0"))
records = open(os.path.join(out_dir, f"records_n{node}_p{os.getpid()}.jsonl"), "a", buffering=1)
print(f"inprocess_worker: pid {os.getpid()} started", file=sys.stderr, flush=True)  # log checks


def record(kind, **fields):
    fields.update(kind=kind, time=time.time(), pid=os.getpid(), node=node,
                  rank=dist.get_rank(), world=dist.get_world_size(),
                  local_rank=int(os.environ["LOCAL_RANK"]))
    records.write(json.dumps(fields) + "\n")


def hold_at(moment, step):
    """Blocks for good when this is the --hold moment and step: the test kills this process."""
    if (moment, step) != (hold_moment, hold_step):
        return
    path = os.path.join(out_dir, f"held_n{node}")
    with open(path + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(path + ".tmp", path)
    while True:
        time.sleep(1)


class HoldingState(elastic.TorchState):
    """A TorchState whose commit of step --hold S holds before its snapshot (--hold commit:S)."""

    def save(self):
        hold_at("commit", getattr(self, "step", 0) - 1)  # state.step is S + 1 once S is done
        super().save()

    def sync(self):
        root = super().sync()
        PHASES["synced"] = time.time()
        return root


def process_start_time():
    """When the kernel started this process (time.time() scale, to a clock tick). The boot time
    comes from /proc/uptime (to 10 ms), not /proc/stat's btime, which is whole seconds."""
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
        boot = time.time() - float(f.read().split()[0])
    return boot + ticks / os.sysconf("SC_CLK_TCK")


PHASES = {"forked": process_start_time(), "started": STARTED, "torch": TORCH_IMPORTED,
          "elastic": IMPORTED}
_init_group = elastic._Context.init_group


def timed_init_group(context, place):
    """elastic's group init, timed for the entry record's phases (the bench's breakdown)."""
    PHASES["place"] = time.time()
    if "group" in PHASES:  # a re-form: this process formed a group before
        time.sleep(delay_reform)
    _init_group(context, place)
    PHASES["group"] = time.time()


elastic._Context.init_group = timed_init_group


def checksum_range(model):
    crc = 0
    for p in model.parameters():
        crc = zlib.crc32(p.detach().numpy().tobytes(), crc)
    low, high = torch.tensor([crc], dtype=torch.int64), torch.tensor([crc], dtype=torch.int64)
    dist.all_reduce(low, op=dist.ReduceOp.MIN)
    dist.all_reduce(high, op=dist.ReduceOp.MAX)
    return int(low.item()), int(high.item())


torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
state = HoldingState(model=model, optimizer=optimizer, step=0)


@elastic.run(backend="gloo")
def train(state):
    low, high = checksum_range(state.model)
    record("entry", round=elastic.current_round(), commits=state.commits, step=state.step,
           started=STARTED, imported=IMPORTED, phases=PHASES, sum_min=low, sum_max=high)
    ddp = DistributedDataParallel(state.model)
    rank = dist.get_rank()
    for step in range(state.step, max_steps):
        if [rank, step] == fail and os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
            os._exit(3)
        stop = torch.tensor([1.0 if os.path.exists(os.path.join(out_dir, "stop")) else 0.0])
        dist.all_reduce(stop, op=dist.ReduceOp.MAX)
        if stop.item() > 0:
            return
        x = torch.randn(16, 8, generator=torch.Generator().manual_seed(step * 1000 + rank))
        loss = ((ddp(x) - x.sum(dim=1, keepdim=True)) ** 2).mean()
        hold_at("step", step)
        state.optimizer.zero_grad()
        loss.backward()
        state.optimizer.step()
        state.step = step + 1
        state.commit()
        record("step", step=step)
        hold_at("between", step)
        time.sleep(pause)


if os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") != "0":
    time.sleep(delay_newcomer)
PHASES["called"] = time.time()
train(state)
low, high = checksum_range(model)
record("end", step=state.step, sum_min=low, sum_max=high)
dist.destroy_process_group()
