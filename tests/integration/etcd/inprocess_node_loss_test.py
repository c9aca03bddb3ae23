"""--recovery=inprocess with the etcd backend: three agents on a real 3-member etcd cluster on
loopback, --nnodes=2:3, one real PyTorch 1.13 gloo DDP worker each, training through
ddprun.elastic (tests/integration/multinode/inprocess_worker.py). The third agent's worker holds
between steps 6 and 7 (--hold between:6); the test then SIGKILLs that agent and its worker. The
survivors' workers keep their PIDs, re-form once at world 2 from step 7 (no committed step done
twice), hold bitwise-equal parameters (CRC32 all-reduced), no restart is spent
(--max_restarts=0), both survivors exit 0, and their event logs say node_lost, then one reform
caused by it.

With the argument `two_nodes_apart DELAY` (the in-process soak's two members lost a moment
apart): four agents, --nnodes=2:4, nodes 3 and 4 holding; node 3 is SIGKILLed, node 4 DELAY
seconds later, while the survivors' workers re-form into the round that still counts node 4 (or
hand over to it). The survivors train on at world 2 with equal parameters, no committed step
done twice, and exit 0: a worker blocked in that round's init may end and start again from its
commit (gloo has no abort), but the job goes on within reform_timeout."""

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
TWO_APART = sys.argv[1] == "two_nodes_apart" if len(sys.argv) > 1 else False
DELAY = float(sys.argv[2]) if TWO_APART else 0.0
NODES = (1, 2, 3, 4) if TWO_APART else (1, 2, 3)
KILLED = (3, 4) if TWO_APART else (3,)


def agent(endpoints, out_dir, node):
    extra = ["--hold", f"between:{HOLD_STEP}"] if node in KILLED else []
    log = os.path.join(out_dir, f"events_n{node}.jsonl")
    return etcdtest.agent_cmd(
        endpoints, "inprocess-loss", f"2:{len(NODES)}", 1,
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
        procs, logs = etcdtest.spawn_agents([agent(cluster.endpoints, work, n) for n in NODES],
                                            work, "agent")
        held = {}
        for n in KILLED:
            held[n] = ddptest.wait_until(lambda: held_pid(work, n), 120, 0.02)
            check(held[n], f"node {n}'s worker never held between steps:\n"
                  + "\n".join(etcdtest.read(log) for log in logs))
        wait_committed(work, (1, 2), HOLD_STEP, "etcd")
        before = {n: {r["pid"] for r in records(work, n)} for n in (1, 2)}
        killed_at = time.time()
        for i, n in enumerate(KILLED):
            if i > 0:
                time.sleep(DELAY)
            os.killpg(procs[n - 1].pid, signal.SIGKILL)
            try:
                os.kill(held[n], signal.SIGKILL)
            except ProcessLookupError:  # blocked past the first loss's hand-over: it gave up
                pass
        for n in KILLED:
            procs[n - 1].wait()

        steps = wait_steps(work, 2, 3, killed_at, "etcd: world 2")
        first = min(r["time"] for r in steps) - killed_at
        print(f"etcd: first step at world 2 completed {first:.2f} s after the SIGKILL",
              flush=True)
        open(os.path.join(work, "stop"), "w").close()
        codes = etcdtest.wait_all(procs[:2], 120)
        for code, log in zip(codes, logs):
            check(code == 0, f"surviving agent exited {code}:\n{etcdtest.read(log)[-3000:]}")

        check_trained_once(work, "etcd")
        if not TWO_APART:
            check_resumed(work, (1, 2), before, HOLD_STEP, "etcd")
            check_kept_workers(work, (1, 2), "etcd")
        gone = ddptest.wait_until(lambda: not ddptest.processes_with_env(f"DDP_TEST_TAG={tag}"),
                                  30)
        check(gone, f"processes left: {ddptest.processes_with_env(f'DDP_TEST_TAG={tag}')}")
    if TWO_APART:
        print(f"ok etcd: two nodes SIGKILLed {DELAY} s apart under --recovery=inprocess: the "
              "survivors trained on at world 2, no step done twice, equal parameters")
    else:
        print("ok etcd: SIGKILL of a node under --recovery=inprocess: the survivors kept their "
              "workers, re-formed at world 2 from their last commit, equal parameters")
finally:
    etcdtest.kill_all(procs)
    ddptest.remove_tree(work)
