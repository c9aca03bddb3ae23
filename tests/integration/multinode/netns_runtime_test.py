"""libddp across nodes (network namespaces, scripts/netns-cluster.sh), through real ddprun agents:
- runtime_worker's every op x dtype (sizes 1 and 1001, then 16 MiB) on a static job of 2 nodes x
  2 workers, exact expected values on every rank, through the hierarchical all_reduce (shared
  memory within a node, Gloo's ring between the nodes' leaders), which the groups report;
- a rank that leaves (node 2's second worker, exiting at once) is named by every other rank's
  failed all_reduce, on both nodes;
- ddp-train on 2 nodes x 1 worker (Gloo's ring) ends with the checkpoint of 1 node x 2 workers,
  byte for byte (a sum of two floats does not depend on the algorithm that adds them), and on
  2 nodes x 2 workers (hierarchical) within 1e-5 of 1 node x 4 workers."""

import os
import sys

import ddptest
import netns_rig
from ddptest import check
from netns_rig import Cluster, addr

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "train"))
import train_common as tc  # noqa: E402

MIB = 1 << 20
# Debug logs of the "coll" logger name the group's all_reduce algorithm.
ENV = {"SPDLOG_LEVEL": "coll=debug", "OMP_NUM_THREADS": "1"}


def static_args(node, nproc, port):
    return ["--nnodes=2", f"--node_rank={node - 1}", f"--master_addr={addr(1)}",
            f"--master_port={port}", f"--nproc_per_node={nproc}", "--monitor_interval=0.1",
            "--no_python"]


def run_two_nodes(nproc, program_args, port, what, timeout=120):
    """Runs a static 2-node job; returns the two agents' stdout+stderr joined."""
    outputs = []
    with Cluster(2) as c:
        agents = [c.start(n, static_args(n, nproc, port) + program_args, env=ENV) for n in (1, 2)]
        for n, p in enumerate(agents, 1):
            rc, out, err = netns_rig.finish_with_output(p, timeout, f"{what}: agent on node {n}")
            check(rc == 0, f"{what}: agent on node {n} exited {rc}\n{out}\n{err}")
            outputs.append(out + err)
    return "\n".join(outputs)


def ops_across_nodes():
    worker = ddptest.bin_path("runtime_worker")
    out = run_two_nodes(2, [worker, "ops", "1", "1001"], 29510, "ops")
    check(out.count("OK ops") == 4, f"{out.count('OK ops')} of 4 ranks printed OK ops:\n{out}")
    algorithms = sorted({line.split("all_reduce=")[1].split()[0]
                         for line in out.splitlines() if "gloo group connected" in line})
    check(algorithms == ["hierarchical"], f"all_reduce algorithms {algorithms}, expected "
          f"hierarchical on 2 nodes x 2 workers:\n{out}")
    print(f"ok every op x dtype on 2 nodes x 2 workers (all_reduce: {', '.join(algorithms)})")
    out = run_two_nodes(2, [worker, "ops-big", str(16 * MIB)], 29511, "ops-big")
    check(out.count("OK ops-big") == 4, f"{out.count('OK ops-big')} of 4 ranks:\n{out}")
    print("ok 16 MiB ops on 2 nodes x 2 workers")
    return algorithms


def leaver_across_nodes():
    out = run_two_nodes(2, [ddptest.bin_path("runtime_worker"), "timeout"], 29514, "timeout")
    check("LEAVING rank=3" in out, f"rank 3 did not leave:\n{out}")
    named = out.count("rank [3] of 4 never arrived")
    check(out.count("OK timeout") == 3 and named >= 3,
          f"not every remaining rank named rank 3 ({named} errors name it):\n{out}")
    print("ok a rank leaving on node 2 is named by the ranks of both nodes")


def trainer_across_nodes():
    tmp = ddptest.temp_dir()
    try:
        args = [*tc.SMALL, "--max_steps", "30", "--batch_size", "32", "--seed", "4"]
        one_node = os.path.join(tmp, "one_node.safetensors")
        tc.ddprun_train(2, [*args, "--checkpoint", one_node])
        two_nodes = os.path.join(tmp, "two_nodes.safetensors")
        run_two_nodes(1, [ddptest.bin_path("ddp-train"), *args, "--checkpoint", two_nodes],
                      29512, "ddp-train")
        with open(one_node, "rb") as a, open(two_nodes, "rb") as b:
            check(a.read() == b.read(), "ddp-train on 2 nodes x 1 ended with another checkpoint "
                  "than on 1 node x 2")
        print("ok ddp-train on 2 nodes x 1 worker == 1 node x 2 workers, bitwise")
        one_node4 = os.path.join(tmp, "one_node4.safetensors")
        tc.ddprun_train(4, [*args, "--checkpoint", one_node4], timeout=120)
        two_nodes2 = os.path.join(tmp, "two_nodes2.safetensors")
        run_two_nodes(2, [ddptest.bin_path("ddp-train"), *args, "--checkpoint", two_nodes2],
                      29513, "ddp-train 2x2")
        diff = tc.relative_difference(tc.read_safetensors(two_nodes2)[0],
                                      tc.read_safetensors(one_node4)[0])
        check(diff <= 1e-5, f"ddp-train 2 nodes x 2 vs 1 node x 4: relative difference {diff}")
        print(f"ok ddp-train on 2 nodes x 2 workers ~ 1 node x 4 workers (relative {diff:.2g})")
    finally:
        ddptest.remove_tree(tmp)


netns_rig.require_rig()
tc.require_data()
ops_across_nodes()
leaver_across_nodes()
trainer_across_nodes()
print("OK")
