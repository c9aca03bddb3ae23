"""etcd rendezvous on a real 3-member etcd cluster (loopback): 4 agents x 2 workers get ranks
0..7 once each while a second job with another run id forms beside them on the same cluster and
never merges with it; the agents of a finished job leave their leases unrevoked; a given
--node_rank orders the members (as --hostfile passes the file order), whatever their arrival;
with one etcd member killed a job still forms; with every member down the agent fails within its
join timeout with one line naming each member.
"""

import glob
import json
import os
import subprocess
import sys
import time

import ddptest
import etcdtest
from ddptest import check

WORKER = [sys.executable, os.path.join(ddptest.SOURCE_DIR, "tests/integration/workers/env_dump.py")]


def records(out_dir):
    return [json.load(open(f))["env"] for f in glob.glob(os.path.join(out_dir, "env_rank*.json"))]


def check_job(out_dir, nodes, nproc, what):
    envs = records(out_dir)
    world = nodes * nproc
    ranks = sorted(int(e["RANK"]) for e in envs)
    check(ranks == list(range(world)), f"{what}: ranks {ranks}, expected 0..{world - 1} once each")
    check(all(int(e["WORLD_SIZE"]) == world for e in envs), f"{what}: WORLD_SIZE is not {world}")
    groups = sorted({int(e["GROUP_RANK"]) for e in envs})
    check(groups == list(range(nodes)), f"{what}: group ranks {groups}")
    masters = {(e["MASTER_ADDR"], e["MASTER_PORT"]) for e in envs}
    check(len(masters) == 1, f"{what}: workers were given several stores: {masters}")
    for e in envs:  # group rank 0 hosts the store: its local rank 0 is global rank 0
        if int(e["RANK"]) == int(e["GROUP_RANK"]) * nproc:
            check(int(e["LOCAL_RANK"]) == 0, f"{what}: rank base of group {e['GROUP_RANK']}")
    return masters.pop()


def run_jobs(cluster, work, jobs, tag):
    """jobs: [(run_id, nodes, nproc)]; starts every agent of every job at once, interleaved."""
    cmds, dirs = [], {}
    for run_id, nodes, nproc in jobs:
        dirs[run_id] = os.path.join(work, f"{tag}_{run_id}")
        os.makedirs(dirs[run_id])
    for i in range(max(nodes for _, nodes, _ in jobs)):
        for run_id, nodes, nproc in jobs:
            if i < nodes:
                cmds.append(etcdtest.agent_cmd(cluster.endpoints, run_id, nodes, nproc,
                                               WORKER + [dirs[run_id]]))
    procs, logs = etcdtest.spawn_agents(cmds, work, tag)
    try:
        codes = etcdtest.wait_all(procs, 60)
    finally:
        etcdtest.kill_all(procs)
    for code, log in zip(codes, logs):
        check(code == 0, f"agent exited {code}:\n{etcdtest.read(log)}")
    return dirs


work = ddptest.temp_dir("ddptest_etcd_")
try:
    with etcdtest.Cluster() as cluster:
        dirs = run_jobs(cluster, work, [("job-a", 4, 2), ("job-b", 2, 2)], "both")
        master_a = check_job(dirs["job-a"], 4, 2, "job-a")
        master_b = check_job(dirs["job-b"], 2, 2, "job-b")
        check(master_a != master_b, f"two run ids share one worker store {master_a}")
        print("ok 4 agents x 2 workers: ranks 0..7 once each; job-b (2 x 2) formed beside it")
        # A finished job's agents leave their leases to expire (a TTL, 10 s, after the last
        # keep-alive) rather than revoke them: at 1,024 nodes the revokes stalled etcd.
        left = subprocess.run(["etcdctl", f"--endpoints={cluster.endpoints}", "get", "--prefix",
                               "/ddprun/job-a/r0/join/", "--keys-only", "-w", "json"],
                              capture_output=True, text=True, timeout=30,
                              env=dict(os.environ, ETCDCTL_API="3"))
        count = json.loads(left.stdout).get("count", 0) if left.returncode == 0 else left.stderr
        check(count == 4, f"job-a's join keys right after its exit: {count} (expected 4)")
        print("ok a finished job's agents leave their leases to expire, unrevoked")

        # Arrival order 2, 0, 1 (a quarter second apart); group ranks must follow --node_rank.
        hinted, hint_dirs = [], []
        for hint in (2, 0, 1):
            hint_dirs.append(os.path.join(work, f"hint{hint}"))
            os.makedirs(hint_dirs[-1])
            cmd = etcdtest.agent_cmd(cluster.endpoints, "job-h", 3, 2, WORKER + [hint_dirs[-1]],
                                     extra=[f"--node_rank={hint}"])
            hinted += etcdtest.spawn_agents([cmd], work, f"hint{hint}_")[0]
            time.sleep(0.25)
        try:
            codes = etcdtest.wait_all(hinted, 60)
        finally:
            etcdtest.kill_all(hinted)
        check(codes == [0, 0, 0], f"job-h agents exited {codes}")
        for hint, out in zip((2, 0, 1), hint_dirs):
            envs = records(out)
            check(len(envs) == 2 and {int(e["GROUP_RANK"]) for e in envs} == {hint},
                  f"--node_rank={hint}: its workers got {[(e['GROUP_RANK'], e['RANK']) for e in envs]}")
            check(sorted(int(e["RANK"]) for e in envs) == [2 * hint, 2 * hint + 1],
                  f"--node_rank={hint}: ranks {[e['RANK'] for e in envs]}")
        print("ok --node_rank 2, 0, 1 arriving in that order get group ranks 2, 0, 1")

        cluster.kill_member(0)  # agents that start there (by pid) must move on
        dirs = run_jobs(cluster, work, [("job-c", 3, 1)], "one_down")
        check_job(dirs["job-c"], 3, 1, "job-c with member 0 killed")
        print("ok a job forms with one etcd member killed")

        cluster.down()
        cmd = etcdtest.agent_cmd(cluster.endpoints, "job-d", 2, 1, WORKER + [work],
                                 conf="join_timeout=3")
        result = ddptest.run(cmd, timeout=30)
        errors = [l for l in result.stderr.splitlines() if "error" in l]
        check(result.returncode == 1, f"etcd down: exit {result.returncode}\n{result.stderr}")
        check(len(errors) == 1, f"etcd down: expected one error line, got {errors}")
        for member in cluster.endpoints.split(","):
            check(member in errors[0], f"etcd down: the error does not name {member}: {errors[0]}")
        check("no etcd member answered" in errors[0], f"etcd down: unclear error: {errors[0]}")
        print(f"ok etcd down at start: {errors[0]}")
finally:
    ddptest.remove_tree(work)
