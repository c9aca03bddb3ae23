"""Real PyTorch DDP (gloo, /usr/bin/python3) across network namespaces: a static 2-node run and
a c10d 3-node run of tests/integration/workers/torch_ddp_train.py. Every rank finishes with the
same parameters, the world size is right, and the c10d store host is group rank 0."""

import json
import os

import ddptest
import netns_rig
from ddptest import check
from netns_rig import Cluster, addr

TRAIN = os.path.join(ddptest.SOURCE_DIR, "tests/integration/workers/torch_ddp_train.py")
# Gloo picks its address by resolving the host name, which is 127.0.0.1 in every namespace.
ENV = {"GLOO_SOCKET_IFNAME": "eth0"}


def check_results(out_dir, world, what):
    results = [json.load(open(os.path.join(out_dir, f"result_rank{r}.json"))) for r in range(world)
               if os.path.exists(os.path.join(out_dir, f"result_rank{r}.json"))]
    check(len(results) == world, f"{what}: {len(results)} of {world} ranks wrote results")
    check({r["world_size"] for r in results} == {world}, f"{what}: world sizes differ")
    check(len({tuple(r["params"]) for r in results}) == 1, f"{what}: parameters differ")
    check(os.path.exists(os.path.join(out_dir, "checkpoint.pt")), f"{what}: no checkpoint")


def static_two_nodes():
    out_dir = ddptest.temp_dir()
    try:
        with Cluster(2) as c:
            agents = [c.start(n, ["--nnodes=2", f"--node_rank={n - 1}", f"--master_addr={addr(1)}",
                                  "--master_port=29500", "--nproc_per_node=1",
                                  "--python", ddptest.TORCH_PYTHON, TRAIN, out_dir], env=ENV)
                      for n in (1, 2)]
            for n, p in enumerate(agents, 1):
                rc, err = netns_rig.finish(p, 90, f"static agent on node {n}")
                check(rc == 0, f"static agent on node {n} exited {rc}\n{err}")
        check_results(out_dir, 2, "static 2-node")
    finally:
        ddptest.remove_tree(out_dir)


def c10d_three_nodes():
    out_dir = ddptest.temp_dir()
    try:
        with Cluster(3) as c:
            args = netns_rig.c10d_args("3", "torch3") + ["--log_level=info"]  # address lines
            args[args.index("--python") + 1] = ddptest.TORCH_PYTHON
            agents = [c.start(n, args + [TRAIN, out_dir], env=ENV) for n in (3, 2, 1)]
            for p in agents:
                rc, err = netns_rig.finish(p, 90, "c10d agent")
                check(rc == 0, f"c10d agent exited {rc}\n{err}")
                check("advertises" in err or "hosts the store" in err, "no address logged")
        check_results(out_dir, 3, "c10d 3-node")
    finally:
        ddptest.remove_tree(out_dir)


netns_rig.require_rig()
ddptest.require_torch()
static_two_nodes()
print("ok static 2-node PyTorch DDP across namespaces")
c10d_three_nodes()
print("ok c10d 3-node PyTorch DDP across namespaces")
