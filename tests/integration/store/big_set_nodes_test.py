"""Issue 15's 3-node case: c10d agents in three network namespaces heartbeat with
keep_alive_interval=1, keep_alive_max_attempt=2 while a real PyTorch worker sets one 256 MiB value
on the worker store, which the store host's agent serves on the same loop as the heartbeats. No
node is declared lost: every agent exits 0 and none logs a loss."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "multinode"))
import ddptest  # noqa: E402
import netns_rig  # noqa: E402
from ddptest import check  # noqa: E402

WORKER = os.path.join(HERE, "big_set_worker.py")


def main():
    netns_rig.require_rig()
    ddptest.require_torch()
    with netns_rig.Cluster(3) as cluster:
        args = netns_rig.c10d_args("3", "bigset") + [WORKER]
        agents = {n: cluster.start(n, args) for n in (1, 2, 3)}
        outputs = {}
        for n, proc in agents.items():
            rc, out, err = netns_rig.finish_with_output(proc, 120, f"agent on node {n}")
            outputs[n] = out
            check(rc == 0, f"agent on node {n} exited {rc}\n{err}")
            check("lost" not in err, f"agent on node {n} declared a node lost:\n{err}")
    took = [line for out in outputs.values() for line in out.splitlines() if "set 256 MiB" in line]
    check(len(took) == 1, f"rank 0 did not report its set: {outputs}")
    print(f"ok no node lost while {took[0].split(']')[-1].strip()}")


main()
