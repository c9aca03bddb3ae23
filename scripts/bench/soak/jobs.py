"""The soak's jobs: what each node's agent runs, and the job's records read back in one shape.

  torch      scripts/bench/soak/soak_worker.py: PyTorch DDP (gloo) workers; restart mode
             checkpoints, in-process mode runs under ddprun.elastic. Records: DIR/*.jsonl.
  ddp-train  the reference trainer (docs/trainer.md) on Fashion-MNIST, a small MLP; restart mode
             resumes from --checkpoint, in-process mode re-forms natively. Records: its
             --train_log DIR/train_log.jsonl.

Every job gives the verdict the same records (Records): starts (rank 0's entries into training:
t, step, world, master_addr), steps (rank 0's completed steps: t, step, world, pid, entered: when
that process entered its current group), checkpoints and commits (t, step), checks (step, world,
lo, hi: the least and greatest per-rank parameter checksum). A worker is asked to fail with exit
3 (`fail`), and the job ends cleanly once DIR/stop exists.
"""

import json
import os
import signal

HERE = os.path.dirname(os.path.abspath(__file__))
TORCH_PYTHON = "/usr/bin/python3"
CHECKPOINT_EVERY = 20  # steps, restart mode
CHECK_EVERY = 5        # steps between parameter checksums


class JsonlTail:
    """A JSON-lines file read incrementally: records() parses only what was appended since the
    last call, and leaves a line without its newline (its writer is mid-write, or was killed
    there) for the next call."""

    def __init__(self, path):
        self.path = path
        self.offset = 0
        self.parsed = []

    def records(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return self.parsed
        end = data.rfind(b"\n") + 1
        for line in data[:end].splitlines():
            if line.strip():
                try:
                    self.parsed.append(json.loads(line))
                except ValueError:
                    pass  # a line cut by the kill that ended its writer, then appended to
        self.offset += end
        return self.parsed


class TorchRecords:
    """soak_worker.py's files: starts, steps, checkpoints, checks (.jsonl) in the job directory."""

    def __init__(self, job_dir):
        self.files = {name: JsonlTail(os.path.join(job_dir, f"{name}.jsonl"))
                      for name in ("starts", "steps", "checkpoints", "checks")}

    def starts(self):
        return [s for s in self.files["starts"].records() if s["rank"] == 0]

    def steps(self):
        return self.files["steps"].records()

    def checkpoints(self):
        return self.files["checkpoints"].records()

    def commits(self):
        return []  # a commit every step: the verdict takes the last step as the last commit

    def checks(self):
        return self.files["checks"].records()


class TrainLogRecords:
    """ddp-train's --train_log: one file of events (start, step, commit, checkpoint, params, end),
    sorted here into the records the verdict reads."""

    def __init__(self, path):
        self.tail = JsonlTail(path)
        self.done = 0
        self.entered = {}  # pid -> t of its last start
        self.sorted = {"starts": [], "steps": [], "checkpoints": [], "commits": [], "checks": []}

    def _read(self, kind):
        events = self.tail.records()
        for e in events[self.done:]:
            event = e.get("event")
            if event == "start":
                self.entered[e["pid"]] = e["t"]
                self.sorted["starts"].append({"t": e["t"], "step": e["step"],
                                              "world": e["world_size"], "pid": e["pid"],
                                              "master_addr": e["master_addr"]})
            elif event == "step":
                self.sorted["steps"].append({"t": e["t"], "step": e["step"],
                                             "world": e["world_size"], "pid": e["pid"],
                                             "entered": self.entered.get(e["pid"], e["t"])})
            elif event in ("checkpoint", "commit"):
                self.sorted[event + "s"].append({"t": e["t"], "step": e["step"]})
            elif event == "params":
                self.sorted["checks"].append({"step": e["step"], "world": e["world_size"],
                                              "lo": e["crc_min"], "hi": e["crc_max"]})
        self.done = len(events)
        return self.sorted[kind]

    def starts(self):
        return self._read("starts")

    def steps(self):
        return self._read("steps")

    def checkpoints(self):
        return self._read("checkpoints")

    def commits(self):
        return self._read("commits")

    def checks(self):
        return self._read("checks")


class TorchJob:
    name = "torch"

    def __init__(self, bin_dir):
        self.bin_dir = bin_dir

    def worker_argv(self, job_dir, recovery):
        argv = ["--python", TORCH_PYTHON, os.path.join(HERE, "soak_worker.py"), job_dir,
                "--checkpoint", str(CHECKPOINT_EVERY), "--check", str(CHECK_EVERY)]
        return argv + (["--elastic"] if recovery == "inprocess" else [])

    def env(self):
        return {"PYTHONUNBUFFERED": "1"}

    def records(self, job_dir):
        return TorchRecords(job_dir)

    def fail(self, job_dir, pid):
        """Asks worker `pid` to exit 3: it checks DIR/fail_<pid> at every step."""
        open(os.path.join(job_dir, f"fail_{pid}"), "w").close()


class DdpTrainJob:
    """ddp-train at a small size, so that a step of 4 ranks on a loaded 2-core machine stays
    short, paced by its rank 0 (--slow_step_ms) as the torch workers pace themselves, so that
    the workers leave the agents their share of the CPU."""
    name = "ddp-train"

    def __init__(self, bin_dir):
        self.bin_dir = bin_dir

    def worker_argv(self, job_dir, recovery):
        argv = ["--no_python", os.path.join(self.bin_dir, "ddp-train"), "--hidden", "32", "--batch_size", "16",
                "--epochs", "1000000", "--backend", "gloo", "--device", "cpu",
                "--slow_step_ms", "30", "--slow_rank", "0", "--log_every", "10",
                "--train_log", os.path.join(job_dir, "train_log.jsonl"),
                "--params_crc_every", str(CHECK_EVERY),
                "--stop_file", os.path.join(job_dir, "stop"), "--fail_on_sigusr1"]
        if recovery == "inprocess":
            return argv + ["--commit_every", "1", "--reform_grace", "1"]  # as ddprun.elastic
        return argv + ["--checkpoint", os.path.join(job_dir, "checkpoint.safetensors"),
                       "--checkpoint_every", str(CHECKPOINT_EVERY)]

    def env(self):
        return {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}

    def records(self, job_dir):
        return TrainLogRecords(os.path.join(job_dir, "train_log.jsonl"))

    def fail(self, job_dir, pid):
        """Asks worker `pid` to exit 3: --fail_on_sigusr1."""
        os.kill(pid, signal.SIGUSR1)


JOBS = {"torch": TorchJob, "ddp-train": DdpTrainJob}
