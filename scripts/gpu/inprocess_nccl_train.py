"""libddp's NCCL abort under ddprun --recovery=inprocess, on two GPUs: two ddprun agents on
loopback under c10d (--nnodes=1:2), each with one ddp-train worker on its own GPU
(CUDA_VISIBLE_DEVICES) and the nccl backend. Once rank 0 has printed STEPS steps, agent 2
and its worker are SIGKILLed in the middle of training: the survivor's next NCCL collective
waits on the dead peer, which NCCL never reports. The agent announces a round of world 1; the
survivor's reform client sees it is smaller than its group and aborts the group from its thread
("aborted the nccl group"), the blocked collective returns, and the survivor re-forms in its
process ("reform round=N ... world_size=1 pid=<same>") and trains on to the end.

Prints one JSON line (aborted: whether the survivor's log says it aborted its group; pid_kept;
the seconds from the kill to the first step at world 1; gave_up: whether it gave its process up
instead; the exit code) and exits 0 when the survivor re-formed in its process and finished.
With fewer than two GPUs it prints a skip line ({"skip": "..."}) and exits 0. --cpu rehearses
the script without a GPU (Gloo: its collectives fail by themselves, so no abort is expected).

Usage: DDP_BIN_DIR=... inprocess_nccl_train.py [--cpu] [--steps 30]   (check.sh's environment
gives DDP_BIN_DIR and DDP_DATA_DIR)"""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.environ.get("DDP_BIN_DIR", os.path.join(HERE, "../../build/bin"))
sys.path.insert(0, os.path.join(HERE, "../bench"))
from netns_bench import wait  # noqa: E402

CONF = "join_timeout=60,keep_alive_interval=1,keep_alive_max_attempt=2,last_call_timeout=1"
PROGRESS = re.compile(r"epoch=\d+/\d+ step=(\d+)/")
REFORM = re.compile(r"reform round=(\d+) rank=\d+ world_size=(\d+) pid=(\d+)")


def count_gpus():
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))


def read_lines(proc, lines):
    for line in proc.stdout:
        lines.append((time.time(), line.rstrip("\n")))


def start_agent(node, port, cpu, lines):
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", NCCL_SOCKET_IFNAME="lo")
    if cpu:
        env["DDP_BACKEND"] = "gloo"
    else:
        env["CUDA_VISIBLE_DEVICES"] = str(node - 1)
    cmd = [os.path.join(BIN, "ddprun"), "--nnodes=1:2", "--nproc_per_node=1",
           "--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{port}",
           f"--rdzv_id=inprocess-nccl-{os.getpid()}", f"--rdzv_conf={CONF}",
           "--recovery=inprocess", "--max_restarts=0", "--no_python",
           os.path.join(BIN, "ddp-train"), "--hidden", "256", "--batch_size", "64",
           "--epochs", "3", "--max_steps", "300", "--log_every", "1", "--slow_step_ms", "50",
           "--slow_rank", "0",
           "--device", "cpu" if cpu else "cuda"]
    if os.environ.get("DDP_DATA_DIR"):
        cmd += ["--data", os.environ["DDP_DATA_DIR"]]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    threading.Thread(target=read_lines, args=(proc, lines[node]), daemon=True).start()
    return proc


def main():
    cpu = "--cpu" in sys.argv
    steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 30
    gpus = 0 if cpu else count_gpus()
    if not cpu and gpus < 2:
        print(json.dumps({"skip": f"needs 2 GPUs (one NCCL rank each), found {gpus}"}),
              flush=True)
        return 0
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    lines = {1: [], 2: []}
    agents = {}
    report = {"device": "cpu (gloo rehearsal)" if cpu else f"{gpus} GPUs (nccl)"}
    try:
        for node in (1, 2):
            agents[node] = start_agent(node, port, cpu, lines)
        printed = lambda node: [int(m.group(1)) for _, line in list(lines[node])
                                if (m := PROGRESS.search(line))]
        # Rank 0 prints the steps, whichever node holds it.
        wait(lambda: any(len(printed(n)) >= steps for n in (1, 2)), 120, f"{steps} steps")
        pid_before = [int(m.group(3)) for _, line in list(lines[1])
                      if (m := REFORM.search(line))][0]
        killed_at = time.time()
        os.killpg(agents[2].pid, signal.SIGKILL)
        agents[2].wait()

        def first_step_at_one():
            after = [(t, line) for t, line in list(lines[1]) if t > killed_at]
            marks = [(t, m) for t, line in after
                     if (m := REFORM.search(line)) and m.group(2) == "1"]
            if not marks:
                return None
            firsts = [t for t, line in after if t > marks[0][0] and PROGRESS.search(line)]
            return (firsts[0], int(marks[0][1].group(3))) if firsts else None

        first, pid_after = wait(first_step_at_one, 60, "the survivor's first step at world 1")
        agents[1].wait(timeout=120)
        survivor = [line for _, line in lines[1]]
        report.update({
            "aborted": any("aborted the nccl group" in line for line in survivor),
            "gave_up": any("ending with 75" in line for line in survivor),
            "pid_kept": pid_after == pid_before,
            "kill_to_first_step_world_1_s": round(first - killed_at, 3),
            "exit_code": agents[1].returncode,
        })
        # Recovered in its process is the pass; "aborted" says whether the abort did it (NCCL
        # could also report the dead peer itself, as an asynchronous error).
        report["ok"] = (report["pid_kept"] and not report["gave_up"] and
                        report["exit_code"] == 0)
    except Exception as error:
        report["ok"] = False
        report["error"] = str(error)
        for node in (1, 2):
            sys.stderr.write(f"--- agent {node}\n" +
                             "\n".join(line for _, line in lines[node][-25:]) + "\n")
    finally:
        for proc in agents.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    print(json.dumps(report), flush=True)
    return 0 if report["ok"] else 1


sys.exit(main())
