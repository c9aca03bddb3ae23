"""--start_method=forkserver on a GPU (issue 30): the template imports torch without initialising
CUDA, and workers forked from it use CUDA, on launch and after a restart.

Runs `ddprun --start_method=forkserver --preload=torch --nproc_per_node=1 --max_restarts=1` on a
worker that records, at its first line, whether torch was already imported and whether CUDA was
initialised (it must not be: the worker's state at that line is the template's), then runs a
matmul on the GPU (checked against the CPU) and a one-rank NCCL all_reduce. Its first attempt
exits 1, so ddprun restarts it from the same template, and the new worker does the same checks.
Prints one JSON line: what passed, the launch time (command -> first line) and the restart time
(ddprun reaping the failed worker -> the new worker's first line), how the workers were forked.
Without a GPU it runs the same with a CPU matmul and a gloo all_reduce, and says "gpu": false.

Usage: python3 scripts/gpu/forkserver_cuda.py   (the interpreter that holds PyTorch)
Environment: DDP_BIN_DIR, the folder with ddprun (default: build/bin of this checkout).
Exit: 0 every check passed; 1 one failed. Takes under 60 s.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("DDP_BIN_DIR") or os.path.join(ROOT, "build", "bin")
TIMEOUT_S = 50

WORKER = r'''
import json, os, sys, time
FIRST = time.monotonic()
TORCH_AT_ENTRY = "torch" in sys.modules
import torch
import torch.distributed as dist
CUDA_AT_ENTRY = torch.cuda.is_initialized()
attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
record = {"attempt": attempt, "first_line": FIRST, "pid": os.getpid(),
          "torch_at_entry": TORCH_AT_ENTRY, "cuda_initialized_at_entry": CUDA_AT_ENTRY}
try:
    gpu = torch.cuda.is_available()
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if gpu else torch.device("cpu")
    if gpu:
        torch.cuda.set_device(device)
        record["device_name"] = torch.cuda.get_device_name(device)
    a = torch.randn(512, 512, generator=torch.Generator().manual_seed(attempt))
    b = torch.randn(512, 512, generator=torch.Generator().manual_seed(attempt + 100))
    product = (a.to(device) @ b.to(device)).cpu()
    record["matmul_ok"] = bool(torch.allclose(product, a @ b, rtol=1e-3, atol=1e-2))
    dist.init_process_group("nccl" if gpu else "gloo")
    x = torch.full((1024,), 3.0, device=device)
    dist.all_reduce(x)
    if gpu:
        torch.cuda.synchronize()
    record["backend"] = dist.get_backend()
    record["all_reduce_ok"] = bool((x.cpu() == 3.0).all())
    dist.destroy_process_group()
    record["cuda_initialized_after"] = torch.cuda.is_initialized()
except Exception as error:
    record["error"] = "%s: %s" % (type(error).__name__, error)
with open(os.path.join(sys.argv[1], "attempt%d.json" % attempt), "w") as f:
    json.dump(record, f)
sys.exit(1 if attempt == 0 else 0)
'''


def run_ddprun(tmp):
    """Runs the job; returns (rc, stderr, start time on CLOCK_MONOTONIC, events)."""
    worker = os.path.join(tmp, "forkserver_cuda_worker.py")
    with open(worker, "w") as f:
        f.write(WORKER)
    events = os.path.join(tmp, "events.jsonl")
    cmd = [os.path.join(BIN, "ddprun"), "--python", sys.executable, "--start_method=forkserver",
           "--preload=torch", "--nproc_per_node=1", "--max_restarts=1", "--log_level=debug",
           "--event_log", events, worker, tmp]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        _, err = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
        err += "\n[timed out after %d s]" % TIMEOUT_S
    parsed = []
    if os.path.exists(events):
        for line in open(events):
            try:
                parsed.append(json.loads(line))
            except ValueError:
                pass
    return proc.returncode, err, start, parsed


def attempt_record(tmp, attempt):
    path = os.path.join(tmp, "attempt%d.json" % attempt)
    return json.load(open(path)) if os.path.exists(path) else {}


def worker_checks(record):
    """The checks every attempt must pass, by name."""
    return {
        "forked_with_torch": record.get("torch_at_entry") is True,
        "cuda_not_initialized_at_entry": record.get("cuda_initialized_at_entry") is False,
        "matmul": record.get("matmul_ok") is True,
        "all_reduce": record.get("all_reduce_ok") is True,
    }


def main():
    try:
        import torch
        gpu = torch.cuda.is_available()
        versions = {"torch": torch.__version__, "cuda": torch.version.cuda}
    except ImportError:
        print(json.dumps({"ok": False, "error": "%s cannot import torch" % sys.executable}))
        return 1
    tmp = tempfile.mkdtemp(prefix="ddp_forkserver_cuda_")
    try:
        rc, err, start, events = run_ddprun(tmp)
        first, second = attempt_record(tmp, 0), attempt_record(tmp, 1)
        ready = re.search(r"forkserver ready pid=\d+ preload=\S+ threads=(\d+) seconds=([\d.]+)",
                          err)
        middle = re.findall(r"workers from the forkserver through_middle=(\w+)", err)
        checks = {"ddprun_exit_0": rc == 0, "template_ready": ready is not None,
                  "one_template_for_both_attempts": len(re.findall("forkserver ready", err)) == 1}
        for name, passed in worker_checks(first).items():
            checks["launch_" + name] = passed
        for name, passed in worker_checks(second).items():
            checks["restart_" + name] = passed
        checks["restart_new_process"] = bool(second) and second.get("pid") != first.get("pid")
        if gpu:
            checks["nccl_backend"] = first.get("backend") == "nccl" == second.get("backend")
        reaped = next((e["mono_time"] for e in events
                       if e.get("event") == "worker_exited" and e.get("exit_code") == 1), None)
        figures = {}
        if first:
            figures["launch_s"] = round(first["first_line"] - start, 3)
        if ready:
            figures["template_threads"] = int(ready.group(1))
            figures["template_ready_s"] = float(ready.group(2))
        if second and reaped is not None:
            figures["restart_ms"] = round((second["first_line"] - reaped) * 1000, 1)
        result = {
            "ok": all(checks.values()), "gpu": gpu,
            "device": first.get("device_name") or second.get("device_name") or "cpu",
            "note": None if gpu else "no GPU: CPU matmul and gloo all_reduce only",
            "checks": checks, "figures": figures, "through_middle": middle,
            "versions": dict(versions, python=sys.version.split()[0]),
            "errors": [r["error"] for r in (first, second) if "error" in r],
        }
        if not result["ok"]:
            result["ddprun_stderr_tail"] = err.strip().splitlines()[-15:]
        print(json.dumps(result))
        return 0 if result["ok"] else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
