"""A real PyTorch 1.13 gloo DDP job on the etcd rendezvous survives the loss of the node that
hosts its store. Three ddprun agents on loopback (distinct processes standing for nodes),
--nnodes=2:3, 2 workers each: once the job has checkpointed a few steps, the agent at group rank
0 (its workers' TCPStore lives in that agent) is SIGKILLed with its workers. The other two agents
elect a new store host, restart at world 4, and the workers resume from the checkpoint and
finish. The survivors' workers fail (their store is gone) before the lost node's lease expires:
the agents' failure verdict waits for the expiry and takes the failures for the loss, so
--max_restarts=0 still finishes and no agent reports a failure.
"""

import glob
import json
import os
import signal
import time

import ddptest
import etcdtest
from ddptest import check

WORKER = os.path.join(ddptest.SOURCE_DIR, "tests/integration/etcd/torch_resume_worker.py")
STEPS = 40


def results(out_dir, world):
    return [json.load(open(f)) for f in glob.glob(os.path.join(out_dir, f"result_world{world}_*"))]


def checkpoint_step(out_dir):
    path = os.path.join(out_dir, "checkpoint.pt")
    if not os.path.exists(path):
        return 0
    probe = ("import sys, torch; print(torch.load(sys.argv[1])['step'])")
    out = ddptest.run([ddptest.TORCH_PYTHON, "-c", probe, path], timeout=60)
    return int(out.stdout.strip() or 0)


ddptest.require_torch()
work = ddptest.temp_dir("ddptest_etcd_torch_")
procs = []
try:
    with etcdtest.Cluster() as cluster:
        cmd = etcdtest.agent_cmd(
            cluster.endpoints, "torch", "2:3", 2, [WORKER, work, str(STEPS), "6"],
            conf="lease_ttl=2,last_call_timeout=2", extra=["--max_restarts=0", "--python",
                                                            ddptest.TORCH_PYTHON])
        procs, logs = etcdtest.spawn_agents([cmd] * 3, work, "agent")
        reached = ddptest.wait_until(lambda: os.path.exists(os.path.join(work, "checkpoint.pt")),
                                     120, interval=0.2)
        check(reached, "no checkpoint from the 3-node job:\n"
                       + "\n".join(etcdtest.read(l)[-3000:] for l in logs))
        time.sleep(1.5)  # a few more steps
        before = checkpoint_step(work)
        check(0 < before < STEPS, f"checkpoint step {before} before the kill")

        host = [i for i, l in enumerate(logs) if "group_rank=0 " in etcdtest.read(l)]
        check(len(host) == 1, f"group rank 0 in {len(host)} agent logs")
        killed_at = time.time()
        os.killpg(procs[host[0]].pid, signal.SIGKILL)  # the node: agent and workers
        procs[host[0]].wait()

        survivors = [p for i, p in enumerate(procs) if i != host[0]]
        codes = etcdtest.wait_all(survivors, 150)
        for code, (i, log) in zip(codes, [(i, l) for i, l in enumerate(logs) if i != host[0]]):
            check(code == 0, f"surviving agent {i} exited {code}:\n{etcdtest.read(log)[-4000:]}")
        for i, log in enumerate(logs):
            check(i == host[0] or "reported failure" not in etcdtest.read(log),
                  f"agent {i} spent a restart on the node loss:\n{etcdtest.read(log)[-4000:]}")
        final = results(work, 4)
        check(sorted(r["rank"] for r in final) == [0, 1, 2, 3],
              f"world-4 results: {[r['rank'] for r in final]}")
        check(all(r["start"] >= before for r in final),
              f"the workers did not resume from the checkpoint (step {before}): "
              f"{[r['start'] for r in final]}")
        check(not results(work, 6), "the 3-node job finished before its store host was killed")
        init_after = max(r["initialized"] for r in final) - killed_at
        print(f"ok store host node lost at step {before}: 2 nodes resumed at world 4 from step "
              f"{final[0]['start']} with store {final[0]['store']}, no restart spent, and "
              f"finished {STEPS} steps; SIGKILL to the last world-4 worker past "
              f"init_process_group: {init_after:.1f} s (lease_ttl=2)")
finally:
    etcdtest.kill_all(procs)
    ddptest.remove_tree(work)
