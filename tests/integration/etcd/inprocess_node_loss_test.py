"""--recovery=inprocess with the etcd backend: three agents on a real 3-member etcd cluster on
loopback, --nnodes=2:3, one real PyTorch 1.13 gloo DDP worker each, training through
ddprun.elastic (tests/integration/multinode/inprocess_worker.py). The third agent's worker holds
between steps 6 and 7 (--hold between:6); the test then SIGKILLs that agent and its worker. The
survivors' workers keep their PIDs, re-form once at world 2 from step 7 (no committed step done
twice), hold bitwise-equal parameters (CRC32 all-reduced), no restart is spent
(--max_restarts=0), both survivors exit 0, and their event logs say node_lost, then one reform
caused by it."""

import os
import signal
import sys
import time
import uuid

import ddptest
import etcdtest
from ddptest import check

sys.path.insert(0, os.path.join(ddptest.SOURCE_DIR, "tests/integration/multinode"))
from inprocess_rig import (WORKER, check_kept_workers, check_resumed,  # noqa: E402
                           check_trained_once, held_pid, records, wait_committed, wait_steps)

HOLD_STEP = 6


def agent(endpoints, out_dir, node):
    extra = ["--hold", f"between:{HOLD_STEP}"] if node == 3 else []
    log = os.path.join(out_dir, f"events_n{node}.jsonl")
    return etcdtest.agent_cmd(
        endpoints, "inprocess-loss", "2:3", 1,
        [WORKER, out_dir, "--node", str(node), *extra],
        conf="lease_ttl=2,last_call_timeout=1,reform_timeout=90",
        extra=["--recovery=inprocess", "--max_restarts=0", f"--event_log={log}",
               "--python", ddptest.TORCH_PYTHON])


ddptest.require_torch()
tag = uuid.uuid4().hex[:12]
work = ddptest.temp_dir("ddptest_etcd_inprocess_")
procs = []
try:
    with etcdtest.Cluster() as cluster:
        os.environ.update(GLOO_SOCKET_IFNAME="lo", DDP_TEST_TAG=tag)  # the agents inherit it
        procs, logs = etcdtest.spawn_agents([agent(cluster.endpoints, work, n) for n in (1, 2, 3)],
                                            work, "agent")
        held = ddptest.wait_until(lambda: held_pid(work, 3), 120, 0.02)
        check(held, "node 3's worker never held between steps:\n"
              + "\n".join(etcdtest.read(log) for log in logs))
        wait_committed(work, (1, 2), HOLD_STEP, "etcd")
        before = {n: {r["pid"] for r in records(work, n)} for n in (1, 2)}
        killed_at = time.time()
        os.killpg(procs[2].pid, signal.SIGKILL)
        os.kill(held, signal.SIGKILL)
        procs[2].wait()

        steps = wait_steps(work, 2, 3, killed_at, "etcd: world 2")
        first = min(r["time"] for r in steps) - killed_at
        print(f"etcd: first step at world 2 completed {first:.2f} s after the SIGKILL",
              flush=True)
        open(os.path.join(work, "stop"), "w").close()
        codes = etcdtest.wait_all(procs[:2], 120)
        for code, log in zip(codes, logs):
            check(code == 0, f"surviving agent exited {code}:\n{etcdtest.read(log)[-3000:]}")

        check_trained_once(work, "etcd")
        check_resumed(work, (1, 2), before, HOLD_STEP, "etcd")
        check_kept_workers(work, (1, 2), "etcd")
        gone = ddptest.wait_until(lambda: not ddptest.processes_with_env(f"DDP_TEST_TAG={tag}"),
                                  30)
        check(gone, f"processes left: {ddptest.processes_with_env(f'DDP_TEST_TAG={tag}')}")
    print("ok etcd: SIGKILL of a node under --recovery=inprocess: the survivors kept their "
          "workers, re-formed at world 2 from their last commit, equal parameters")
finally:
    etcdtest.kill_all(procs)
    ddptest.remove_tree(work)
