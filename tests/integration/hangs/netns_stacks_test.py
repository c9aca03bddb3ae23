"""Stacks and hangs across nodes (network namespaces, scripts/netns-cluster.sh):
- a 2-node x 2-worker job, static and then c10d: SIGQUIT to one node's ddprun makes every agent
  answer through the store and that ddprun's report gathers all four ranks of both nodes;
  ddprun-stacks asks the same from outside the job (the root namespace);
- ddp-train on 2 nodes x 1 worker with rank 1 (node 2) hung: node 2's detector names rank 1
  from the wait node 1 published in the store, and both nodes restart and finish."""
import glob
import os
import signal
import sys
import time

import ddptest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "multinode"))
import netns_rig  # noqa: E402
from netns_rig import Cluster, addr  # noqa: E402

SLEEPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workers", "sleeper.py")


def check_report(report, what):
    for needle in ("4 rank(s) on 2 node(s)", "ranks 0-3 (python):",
                   "in sleep_inside_named_function"):
        ddptest.check(needle in report, f"{what}: report lacks {needle!r}:\n{report}")


def run_job(cluster, tmp, name, node_args, endpoint, run_id):
    out = os.path.join(tmp, name)
    os.makedirs(out)
    logs = {n: os.path.join(tmp, f"{name}_logs{n}") for n in (1, 2)}
    agents = {n: cluster.start(n, node_args(n) + ["--log_dir", logs[n], SLEEPER, out])
              for n in (1, 2)}
    try:
        ready = ddptest.wait_until(
            lambda: len(glob.glob(os.path.join(out, "ready_rank*"))) == 4, 60)
        ddptest.check(ready, f"{name}: not every worker started")
        time.sleep(0.3)  # the sleepers are inside their named function
        os.kill(agents[2].pid, signal.SIGQUIT)
        ddptest.wait_until(lambda: glob.glob(os.path.join(logs[2], "*", "stacks_*.txt")), 30)
        reports = glob.glob(os.path.join(logs[2], "*", "stacks_*.txt"))
        ddptest.check(reports, f"{name}: node 2 wrote no report")
        check_report(open(reports[0]).read(), f"{name}: SIGQUIT on node 2")
        answers = glob.glob(os.path.join(logs[1], "*", "stack_answer_*.json"))
        ddptest.check(answers, f"{name}: node 1 recorded no answer")
        result = ddptest.run([ddptest.bin_path("ddprun-stacks"), "--rdzv_endpoint", endpoint,
                              "--rdzv_id", run_id], timeout=60)
        ddptest.check(result.returncode == 0, f"{name}: ddprun-stacks exited "
                      f"{result.returncode}:\n{result.stderr}")
        check_report(result.stdout, f"{name}: ddprun-stacks")
        for n in (1, 2):
            ddptest.check(agents[n].poll() is None, f"{name}: node {n}'s ddprun ended")
    finally:
        # Node 2 first: the store lives in node 1's agent.
        for n in (2, 1):
            if agents[n].poll() is None:
                agents[n].send_signal(signal.SIGTERM)
            rc, err = netns_rig.finish(agents[n], 60, f"{name}: node {n}")
            ddptest.check(rc == 128 + signal.SIGTERM,
                          f"{name}: node {n} must end by SIGTERM (143), exited {rc}:\n{err}")
    print(f"{name}: SIGQUIT on node 2 and ddprun-stacks both gathered 4 ranks of 2 nodes")


def run_hang_across_nodes(cluster, tmp):
    port = 29533

    def args(n):
        return ["--nnodes=2", f"--node_rank={n - 1}", f"--master_addr={addr(1)}",
                f"--master_port={port}", "--nproc_per_node=1", "--hang_timeout=3",
                "--max_restarts=1", "--log_dir", os.path.join(tmp, f"hang_logs{n}"),
                "--no_python", ddptest.bin_path("ddp-train"), "--max_steps", "30",
                "--hang_at_step", "10", "--hang_rank", "1"]
    agents = {n: cluster.start(n, args(n)) for n in (1, 2)}
    logs = {}
    for n in (1, 2):
        rc, err = netns_rig.finish(agents[n], 120, f"hang: node {n}")
        logs[n] = err
        ddptest.check(rc == 0, f"hang: node {n} must restart and finish, exited {rc}:\n{err}")
    verdict = "hang: rank 1 made no progress while rank 0 waits in all_reduce"
    ddptest.check(verdict in logs[2], f"node 2 did not name rank 1:\n{logs[2]}")
    ddptest.check("2 rank(s) on 2 node(s)" in logs[2] and "hang_forever" in logs[2],
                  f"node 2's hang report must gather both nodes:\n{logs[2]}")
    print("hang across nodes: node 2 named rank 1 from node 1's published wait; both restarted "
          "and finished")


def main():
    netns_rig.require_rig()
    tmp = ddptest.temp_dir("ddptest_netns_stacks_")
    try:
        with Cluster(2) as cluster:
            port = 29531

            def static_args(n):
                return ["--nnodes=2", f"--node_rank={n - 1}", f"--master_addr={addr(1)}",
                        f"--master_port={port}", "--nproc_per_node=2", "--python",
                        sys.executable]
            run_job(cluster, tmp, "static", static_args, f"{addr(1)}:{port}", "none")

            def c10d_args(n):
                return netns_rig.c10d_args(2, "stacksjob", nproc=2)
            run_job(cluster, tmp, "c10d", c10d_args, f"{addr(1)}:29400", "stacksjob")
            run_hang_across_nodes(cluster, tmp)
    finally:
        ddptest.remove_tree(tmp)


if __name__ == "__main__":
    main()
