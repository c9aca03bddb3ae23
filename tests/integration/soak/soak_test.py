"""The short soak: scripts/bench/soak/soak.py for about two minutes with a fixed seed. Passes when
every fault kind of the backend was injected at least once and every invariant held (no job lost,
equal parameters, no progress lost past the last checkpoint or commit, no orphan, every event the
agents could see in their event logs, flat agent memory and descriptors).

Usage: soak_test.py BACKEND RECOVERY"""

import json
import os
import subprocess
import sys

import ddptest

backend, recovery = sys.argv[1], sys.argv[2]
ddptest.require_root()
ddptest.require(os.path.exists(ddptest.TORCH_PYTHON), "no /usr/bin/python3 with torch")
ddptest.require(subprocess.run([ddptest.TORCH_PYTHON, "-c", "import torch"],
                               capture_output=True).returncode == 0, "torch is not importable")
if backend == "etcd":
    ddptest.require(subprocess.run(["which", "etcd"], capture_output=True).returncode == 0,
                    "etcd is not installed")

soak = os.path.join(ddptest.SOURCE_DIR, "scripts/bench/soak/soak.py")
work = ddptest.temp_dir(f"ddptest_soak_{backend}_{recovery}_")
cmd = [sys.executable, soak, "--bin", ddptest.BIN_DIR, "--minutes", "1.5", "--seed", "20261127",
       "--backend", backend, "--recovery", recovery, "--work", work]
proc = subprocess.run(cmd, capture_output=True, text=True, timeout=540)
print(proc.stdout[-6000:])
lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
ddptest.check(lines, f"the soak printed no JSON line (exit {proc.returncode})\n{proc.stderr[-4000:]}")
result = json.loads(lines[-1])
sys.path.insert(0, os.path.dirname(soak))
import faults  # noqa: E402

missing = [k for k in faults.kinds_for(backend) if result["faults"].get(k, 0) < 1]
ddptest.check(not missing, f"fault kinds never injected: {missing}")
# The kinds with a detection window report the time after the agents' verdict beside it.
for kind in result["detection_window_s"]:
    ddptest.check(result["after_detection_s"].get(kind, {}).get("n", 0) >= 1,
                  f"{kind}: no after_detection_s figure")
# c10d's store host ends the job: its figure is the next job's start, not a recovery.
if backend == "c10d":
    ddptest.check(result["job_restart_s"]["n"] == result["faults"].get("store_host_kill", 0) and
                  "store_host_kill" not in result["recovery_s"],
                  "store_host_kill is not reported as job_restart_s")
ddptest.check(proc.returncode == 0 and result["ok"],
              f"the soak's invariants broke (exit {proc.returncode}); records in {work}\n"
              f"{proc.stderr[-4000:]}")
print(f"short soak {backend}/{recovery}: {sum(result['faults'].values())} faults, "
      f"jobs lost {result['jobs_lost']}, orphans {result['orphans']}, "
      f"events missing {result['events_missing']}")
