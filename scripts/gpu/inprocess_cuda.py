"""In-process recovery with CUDA workers on one GPU (PyTorch 2.x): 3 ddprun agents on loopback
under c10d with --recovery=inprocess, each with one worker (scripts/gpu/inprocess_worker_cuda.py:
a CUDA model, the gloo backend, since one GPU cannot hold two NCCL ranks); once every rank has
committed 10 steps at world 3, agent 3 is SIGKILLed (its worker dies with it). Prints one JSON
line: whether the survivors kept their PIDs, whether their CUDA state stayed (the first
parameter's device pointer and torch.cuda.memory_allocated() the same before and after), the
seconds from the kill to the first step committed at world 2 by both survivors, and the
committed steps done again. Exit 0 when every check holds. Runs in well under 90 s.

Usage: DDP_BIN_DIR=... inprocess_cuda.py [--cpu]   (check.sh's environment gives DDP_BIN_DIR;
--cpu rehearses it without a GPU)"""

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "inprocess_worker_cuda.py")
BIN = os.environ.get("DDP_BIN_DIR", os.path.join(HERE, "../../build/bin"))
sys.path.insert(0, os.path.join(HERE, "../bench"))
from netns_bench import records, wait  # noqa: E402

CONF = "join_timeout=60,keep_alive_interval=1,keep_alive_max_attempt=2,last_call_timeout=1"


def every_rank_at(out, world, count, after):
    steps = [r for r in records(out) if r["world"] == world and r["time"] > after]
    by_node = {}
    for r in sorted(steps, key=lambda r: r["time"]):
        by_node.setdefault(r["node"], []).append(r)
    if len(by_node) < world or min(len(v) for v in by_node.values()) < count:
        return None
    return by_node


def main():
    cpu = "--cpu" in sys.argv
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tempfile.mkdtemp(prefix="ddp-inprocess-cuda.")
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", PYTHONUNBUFFERED="1")
    agents = {}
    report = {"torch": None, "device": "cpu" if cpu else "cuda"}
    try:
        for node in (1, 2, 3):
            cmd = [os.path.join(BIN, "ddprun"), "--nnodes=2:3", "--nproc_per_node=1",
                   "--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{port}",
                   f"--rdzv_id=inprocess-cuda-{os.getpid()}", f"--rdzv_conf={CONF}",
                   "--recovery=inprocess", "--max_restarts=0", "--python", sys.executable,
                   WORKER, out, str(node)] + (["--cpu"] if cpu else [])
            log = open(os.path.join(out, f"agent{node}.log"), "w")
            agents[node] = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        wait(lambda: every_rank_at(out, 3, 10, 0.0), 60, "10 steps at world 3 on every rank")
        before = {r["node"]: r for r in sorted(records(out), key=lambda r: r["time"])
                  if r["node"] in (1, 2)}
        committed = max(r["step"] for r in records(out))
        killed_at = time.time()
        os.killpg(agents[3].pid, signal.SIGKILL)
        agents[3].wait()
        at_two = wait(lambda: every_rank_at(out, 2, 1, killed_at), 30,
                      "a step at world 2 on both survivors")
        first = max(v[0]["time"] for v in at_two.values())
        open(os.path.join(out, "stop"), "w").close()
        for node in (1, 2):
            agents[node].wait(timeout=30)
        after = {n: v[0] for n, v in at_two.items()}
        report.update({
            "survivor_pids_kept": all(after[n]["pid"] == before[n]["pid"] for n in (1, 2)),
            "cuda_context_kept": all(after[n]["ptr"] == before[n]["ptr"] for n in (1, 2)),
            "memory_allocated_unchanged": all(after[n]["memory"] == before[n]["memory"]
                                              for n in (1, 2)),
            "memory_allocated": {str(n): [before[n]["memory"], after[n]["memory"]]
                                 for n in (1, 2)},
            "kill_to_first_step_world_2_s": round(first - killed_at, 3),
            "steps_redone": max(0, committed + 1 - min(r["step"] for r in after.values())),
            "exit_codes": {str(n): agents[n].returncode for n in (1, 2)},
        })
        report["torch"] = subprocess.run([sys.executable, "-c",
                                          "import torch; print(torch.__version__)"],
                                         capture_output=True, text=True).stdout.strip()
        report["ok"] = (report["survivor_pids_kept"] and report["cuda_context_kept"] and
                        report["memory_allocated_unchanged"] and report["steps_redone"] == 0 and
                        all(agents[n].returncode == 0 for n in (1, 2)))
    except Exception as error:
        report["ok"] = False
        report["error"] = str(error)
        for node in (1, 2, 3):
            path = os.path.join(out, f"agent{node}.log")
            if os.path.exists(path):
                with open(path) as f:
                    sys.stderr.write(f"--- agent {node}\n" + "".join(f.readlines()[-15:]))
    finally:
        for p in agents.values():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        subprocess.run(["rm", "-rf", out])
    print(json.dumps(report), flush=True)
    return 0 if report["ok"] else 1


sys.exit(main())
