"""Issue 33: mpirun across two network-namespace nodes (scripts/netns-cluster.sh) with real
OpenSSH servers (tests/integration/hostfile/ssh_rig.py): `mpirun -H node1,node2 -np 2 ddprun
--nproc_per_node=2 ...` started in node 1 makes one job of 2 nodes x 2 workers with nothing
filled in: node rank = task rank, master = mpirun's host (node 1, where task 0 runs). First with
env-dumping workers, then with real PyTorch DDP workers."""
import glob
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "hostfile"))
sys.path.insert(0, os.path.join(HERE, "..", "agent"))
import agenttest  # noqa: E402
import ddptest  # noqa: E402
import ssh_rig  # noqa: E402  (puts tests/integration/multinode on the path)
from netns_rig import addr  # noqa: E402
from ddptest import check  # noqa: E402


def mpirun(cluster, args, env_exports, timeout):
    cmd = ["ip", "netns", "exec", "ddpn1", "mpirun", "--allow-run-as-root",
           "--mca", "plm_rsh_agent", cluster.ssh_command(), "--mca", "plm_rsh_no_tree_spawn", "1",
           "-H", f"{addr(1)},{addr(2)}", "-np", "2"]
    for item in env_exports + [cluster.tag]:
        cmd += ["-x", item]
    cmd += [ddptest.bin_path("ddprun"), "--nproc_per_node=2", *args]
    return ddptest.run(cmd, timeout=timeout)


def env_job(cluster, out):
    result = mpirun(cluster, ["--python", agenttest.PYTHON, agenttest.worker("env_dump.py"), out],
                    [], 120)
    agenttest.expect_exit(result, 0, "mpirun across 2 nodes")
    records = agenttest.env_dumps(out, attempt=0)
    check(sorted(records) == [0, 1, 2, 3], f"ranks {sorted(records)}")
    for rank, record in records.items():
        env = record["env"]
        check(env["MASTER_ADDR"] == addr(1) and env["GROUP_RANK"] == str(rank // 2)
              and env["WORLD_SIZE"] == "4", f"rank {rank}: MASTER_ADDR={env['MASTER_ADDR']} "
              f"GROUP_RANK={env['GROUP_RANK']}")
    print("ok mpirun -H node1,node2: 2 nodes x 2 workers, master", addr(1))


def torch_job(cluster, out):
    result = mpirun(cluster, ["--python", ddptest.TORCH_PYTHON,
                              agenttest.worker("torch_ddp_train.py"), out, "--steps", "3"],
                    ["GLOO_SOCKET_IFNAME=eth0"], 180)
    agenttest.expect_exit(result, 0, "mpirun 2 x 2 PyTorch DDP across nodes")
    results = [json.load(open(path)) for path in glob.glob(os.path.join(out, "result_rank*.json"))]
    check(len(results) == 4 and {r["world_size"] for r in results} == {4},
          f"results: {len(results)}")
    check(len({tuple(r["params"]) for r in results}) == 1, "parameters differ across ranks")
    print("ok mpirun across 2 nodes: 2 x 2 real PyTorch DDP workers")


def main():
    ssh_rig.require_ssh()
    ddptest.require(shutil.which("mpirun") is not None,
                    "mpirun missing (apt-get install openmpi-bin)")
    ddptest.require_torch()
    work = ddptest.temp_dir()
    try:
        with ssh_rig.SshCluster(2) as cluster:
            for name, case in (("env", env_job), ("torch", torch_job)):
                out = os.path.join(work, name)
                os.makedirs(out)
                case(cluster, out)
    finally:
        ddptest.remove_tree(work)


if __name__ == "__main__":
    main()
