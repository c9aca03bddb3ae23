"""Test worker: what user code can see of how it was started. Writes DIR/probe_rank<R>_attempt<N>
.json with sys.executable, sys.path[0], __file__, __name__, sys.argv, the environment, cwd,
pid/ppid/pgid, the CPU affinity, the command line ps shows (/proc/self/cmdline) and whether torch was already imported at the first line; then
acts as --mode says:

  exit N        sys.exit(N), after registering an atexit handler that prints "atexit ran", and
                leaving for the interpreter's end: a non-daemon thread still running (it prints
                "thread joined"), a global whose __del__ prints "finalizer ran", a file written
                and never closed (DIR/left_open_rank<R>.txt) and an open NamedTemporaryFile in DIR
  raise         an uncaught ValueError("probe failure") (exit 1, traceback on stderr)
  loader K      a torch DataLoader with K workers under the 'fork' and 'spawn' contexts
  wait          writes DIR/ready_rank<R>, then sleeps until a signal (SIGTERM: prints and exits 0)

Usage: forkserver_probe.py DIR [--mode exit|raise|loader|wait] [--arg N]
"""
import atexit
import json
import os
import signal
import sys
import time

TORCH_AT_FIRST_LINE = "torch" in sys.modules


def command_line():
    """What ps shows: /proc/self/cmdline's words, without the NULs that may pad its end."""
    with open("/proc/self/cmdline", "rb") as f:
        words = f.read().decode().split("\0")
    while words and not words[-1]:
        words.pop()
    return words


def record(directory):
    rank = os.environ["RANK"]
    attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]
    data = {
        "executable": sys.executable, "path0": sys.path[0], "file": __file__, "name": __name__,
        "argv": sys.argv, "env": dict(os.environ), "cwd": os.getcwd(), "pid": os.getpid(),
        "ppid": os.getppid(), "pgid": os.getpgid(0), "affinity": sorted(os.sched_getaffinity(0)),
        "torch_at_first_line": TORCH_AT_FIRST_LINE,
        "main_file": getattr(sys.modules["__main__"], "__file__", None),
        "cmdline": command_line(),
    }
    path = os.path.join(directory, f"probe_rank{rank}_attempt{attempt}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(data, f)
    os.replace(path + ".tmp", path)
    return rank


def square(x):
    return x * x


class Squares:  # a Dataset: picklable for 'spawn' because it lives in __main__'s file
    def __len__(self):
        return 8

    def __getitem__(self, index):
        return square(index)


def loader(directory, rank, workers):
    import torch.utils.data
    sums = {}
    for method in ("fork", "spawn"):
        batches = torch.utils.data.DataLoader(Squares(), batch_size=4, num_workers=workers,
                                              multiprocessing_context=method)
        sums[method] = int(sum(batch.sum() for batch in batches))
    with open(os.path.join(directory, f"loader_rank{rank}.json"), "w") as f:
        json.dump(sums, f)


class SaysWhenFreed:
    def __init__(self, rank):
        self.rank = rank

    def __del__(self):
        print(f"finalizer ran rank {self.rank}", flush=True)


def leave_for_the_end(directory, rank):
    """What only the interpreter's end finishes: kept in __main__'s globals."""
    import tempfile
    import threading
    global LEFT_OPEN, TEMPORARY, FREED_AT_END

    def late_thread():
        time.sleep(0.3)
        print(f"thread joined rank {rank}", flush=True)
    threading.Thread(target=late_thread).start()
    LEFT_OPEN = open(os.path.join(directory, f"left_open_rank{rank}.txt"), "w")
    LEFT_OPEN.write("written, never closed")
    TEMPORARY = tempfile.NamedTemporaryFile(dir=directory, prefix=f"temporary_rank{rank}_")
    FREED_AT_END = SaysWhenFreed(rank)


def wait(directory, rank):
    def on_term(signum, frame):
        print(f"rank {rank} got signal {signum}", flush=True)
        sys.exit(0)
    signal.signal(signal.SIGTERM, on_term)
    with open(os.path.join(directory, f"ready_rank{rank}"), "w") as f:
        f.write(str(os.getpid()))
    while True:
        time.sleep(1)


def main():
    directory = sys.argv[1]
    mode = sys.argv[sys.argv.index("--mode") + 1] if "--mode" in sys.argv else "exit"
    arg = int(sys.argv[sys.argv.index("--arg") + 1]) if "--arg" in sys.argv else 0
    rank = record(directory)
    if mode == "exit":
        atexit.register(lambda: print(f"atexit ran rank {rank}", flush=True))
        leave_for_the_end(directory, rank)
        sys.exit(arg)
    if mode == "raise":
        raise ValueError("probe failure")
    if mode == "loader":
        loader(directory, rank, arg)
    if mode == "wait":
        wait(directory, rank)


if __name__ == "__main__":
    main()
