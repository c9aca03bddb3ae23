"""`ddprun --hostfile` against real OpenSSH servers in netns nodes (ssh_rig.py): ranks and output
from 2 hosts x 2 slots, uneven slots with --exclude, c10d ranks in file order, SIGTERM to the local ddprun and a killed
local ddprun (lost ssh connections) leave nothing on any node, a host that refuses ssh fails
fast with its name, and (`torch`) a PyTorch 1.13 gloo DDP job across hosts.

Usage: hostfile_test.py basic | torch
"""

import json
import os
import signal
import sys
import time

import ddptest
import ssh_rig  # first: it puts tests/integration/multinode (netns_rig) on the path
import netns_rig
from ddptest import check
from netns_rig import addr
from ssh_rig import SshCluster

WORKERS = os.path.join(ddptest.SOURCE_DIR, "tests/integration/workers")
ENV_DUMP = os.path.join(WORKERS, "env_dump.py")
TRAP_TERM = os.path.join(WORKERS, "trap_term.py")
FAIL_ONCE = os.path.join(WORKERS, "fail_once.py")
TRAIN = os.path.join(WORKERS, "torch_ddp_train.py")
PY = ["--python", ddptest.TORCH_PYTHON]


def records(out_dir):
    return {int(r["RANK"]): r for r in netns_rig.records(out_dir)}


def finish(p, timeout, what):
    rc, out, err = netns_rig.finish_with_output(p, timeout, what)
    return rc, out, err


def no_leftovers(cluster, what):
    left = ddptest.wait_until(lambda: not cluster.tagged(), 20)
    check(left, f"{what}: processes left: "
          + ", ".join(open(f"/proc/{p}/cmdline").read().replace("\0", " ")[:120]
                      for p in cluster.tagged() if os.path.exists(f"/proc/{p}/cmdline")))


def two_by_two(c, out_dir):
    hosts = c.hostfile(["# two nodes", f"{addr(1)} slots=2", f"{addr(2)} slots=2  # second"])
    p = c.launch(["--hostfile", hosts, "--log_level=info", *PY, ENV_DUMP, out_dir],
                 env={"NCCL_HOSTFILE_TEST": "on"})
    rc, out, err = finish(p, 60, "2x2 launch")
    check(rc == 0, f"2x2: exit {rc}\n{out}\n{err}")
    recs = records(out_dir)
    check(sorted(recs) == [0, 1, 2, 3], f"2x2: ranks {sorted(recs)}")
    for rank, r in recs.items():
        node = 1 + rank // 2
        check(r["WORLD_SIZE"] == "4" and r["LOCAL_WORLD_SIZE"] == "2", f"2x2: rank {rank} sizes")
        check(r["GROUP_RANK"] == str(node - 1), f"2x2: rank {rank} GROUP_RANK {r['GROUP_RANK']}")
        check(r["DDPRUN_NODE_NAME"] == addr(node), f"2x2: rank {rank} ran on {r['DDPRUN_NODE_NAME']}")
        check(r["MASTER_ADDR"] == addr(1), f"2x2: MASTER_ADDR {r['MASTER_ADDR']}")
        check(r.get("NCCL_HOSTFILE_TEST") == "on", "2x2: NCCL_* not forwarded")
        line = f"[{addr(node)}:{rank}]: env_dump rank={rank} attempt=0"
        check(line in out.splitlines(), f"2x2: no line '{line}' in\n{out}")
    check(f"[{addr(2)}]: [ddprun]" in err, f"2x2: host 2's agent log not prefixed\n{err}")
    print("ok 2 hosts x 2 slots: ranks 0..3 at world 4, output back with [host:rank]")


def uneven(c, out_dir):
    hosts = c.hostfile([f"{addr(1)} slots=1", f"{addr(3)} slots=2", f"{addr(2)} slots=3"])
    p = c.launch(["--hostfile", hosts, "--exclude", addr(3), *PY, ENV_DUMP, out_dir])
    rc, out, err = finish(p, 60, "uneven launch")
    check(rc == 0, f"uneven: exit {rc}\n{out}\n{err}")
    recs = records(out_dir)
    check(sorted(recs) == [0, 1, 2, 3], f"uneven: ranks {sorted(recs)}")
    expect = {0: (addr(1), "1", "0"), 1: (addr(2), "3", "1"), 2: (addr(2), "3", "1"),
              3: (addr(2), "3", "1")}
    for rank, (host, lws, group) in expect.items():
        r = recs[rank]
        got = (r["DDPRUN_NODE_NAME"], r["LOCAL_WORLD_SIZE"], r["GROUP_RANK"])
        check(got == (host, lws, group) and r["WORLD_SIZE"] == "4", f"uneven: rank {rank} {got}")
    print("ok uneven slots 1+3 (node 3 excluded): ranks in file order, LOCAL_WORLD_SIZE per host")


def c10d(c, out_dir):
    hosts = c.hostfile([f"{addr(1)} slots=1", f"{addr(3)} slots=2", f"{addr(2)} slots=1"])
    p = c.launch(["--hostfile", hosts, "--rdzv_backend=c10d", *PY, ENV_DUMP, out_dir])
    rc, out, err = finish(p, 60, "c10d launch")
    check(rc == 0, f"c10d: exit {rc}\n{out}\n{err}")
    recs = records(out_dir)
    got = [(recs[r]["DDPRUN_NODE_NAME"], recs[r]["GROUP_RANK"]) for r in sorted(recs)]
    want = [(addr(1), "0"), (addr(3), "1"), (addr(3), "1"), (addr(2), "2")]
    check(got == want, f"c10d: ranks by host {got}, expected file order {want}")
    check(len({r["TORCHELASTIC_RUN_ID"] for r in recs.values()}) == 1, "c10d: run ids differ")
    print("ok c10d: the first host hosts the store, node ranks follow the file")


def wait_ready(out_dir, count, p, what):
    ready = lambda: len([f for f in os.listdir(out_dir) if f.startswith("ready_rank")]) >= count
    if not ddptest.wait_until(ready, 30):
        p.kill()
        _, out, err = finish(p, 10, what)
        ddptest.fail(f"{what}: workers not ready\n{out}\n{err}")


def sigterm(c, out_dir):
    hosts = c.hostfile([f"{addr(1)} slots=2", f"{addr(2)} slots=2"])
    p = c.launch(["--hostfile", hosts, *PY, TRAP_TERM, out_dir])
    wait_ready(out_dir, 4, p, "sigterm")
    os.kill(p.pid, signal.SIGTERM)
    rc, out, err = finish(p, 60, "sigterm")
    check(rc == 143, f"sigterm: exit {rc}\n{out}\n{err}")
    for rank in range(4):
        with open(os.path.join(out_dir, f"signal_rank{rank}")) as f:
            check("SIGTERM" in f.read(), f"sigterm: rank {rank} got no SIGTERM")
    no_leftovers(c, "sigterm")
    print("ok SIGTERM to the local ddprun reaches every worker; nothing is left on any node")


def killed_launcher(c, out_dir):
    hosts = c.hostfile([f"{addr(1)} slots=1", f"{addr(2)} slots=1"])
    p = c.launch(["--hostfile", hosts, *PY, TRAP_TERM, out_dir])
    wait_ready(out_dir, 2, p, "killed launcher")
    os.kill(p.pid, signal.SIGKILL)
    p.communicate()
    no_leftovers(c, "SIGKILL of the local ddprun")
    for rank in range(2):
        with open(os.path.join(out_dir, f"signal_rank{rank}")) as f:
            check("SIGHUP" in f.read(), f"killed launcher: rank {rank} got no SIGHUP")
    print("ok SIGKILL of the local ddprun: each host's agent sees its ssh gone and stops")


def lost_connection(c, out_dir):
    hosts = c.hostfile([f"{addr(1)} slots=1", f"{addr(2)} slots=1"])
    p = c.launch(["--hostfile", hosts, *PY, TRAP_TERM, out_dir])
    wait_ready(out_dir, 2, p, "lost connection")
    ssh = [int(pid) for pid in open(f"/proc/{p.pid}/task/{p.pid}/children").read().split()
           if addr(2) in open(f"/proc/{pid}/cmdline").read().split("\0")]
    check(len(ssh) == 1, f"lost connection: host 2's ssh not found among {ssh}")
    os.kill(ssh[0], signal.SIGKILL)
    rc, out, err = finish(p, 60, "lost connection")
    check(rc == 137, f"lost connection: exit {rc}\n{out}\n{err}")
    last = err.strip().splitlines()[-1]
    check(last == f"ddprun: error: host {addr(2)}: ssh was killed by SIGKILL", f"last: {last}")
    no_leftovers(c, "lost connection")
    for rank, sig in ((0, "SIGTERM"), (1, "SIGHUP")):
        with open(os.path.join(out_dir, f"signal_rank{rank}")) as f:
            check(sig in f.read(), f"lost connection: rank {rank} got no {sig}")
    print("ok host 2's ssh killed: its agent stops on stdin EOF (SIGHUP), host 1 is stopped")


def worker_failure(c, out_dir):
    hosts = c.hostfile([f"{addr(1)} slots=2", f"{addr(2)} slots=2"])
    p = c.launch(["--hostfile", hosts, *PY, FAIL_ONCE, out_dir, "--rank", "3", "--code", "7"],
                 env={"DDP_TEST_HEALTHY_SECONDS": "30"})
    rc, out, err = finish(p, 60, "worker failure")
    check(rc == 7, f"worker failure: exit {rc} (the root cause exited 7)\n{out}\n{err}")
    check(f"[{addr(2)}]:   host      : {addr(2)}" in err, f"worker failure: no report\n{err}")
    no_leftovers(c, "worker failure")
    print("ok rank 3 on host 2 exits 7: ddprun exits 7, the report names the host")


def refused(c, out_dir):
    hosts = c.hostfile([f"{addr(1)} slots=1", f"{addr(4)} slots=1"])  # no sshd on node 4
    start = time.monotonic()
    p = c.launch(["--hostfile", hosts, *PY, TRAP_TERM, out_dir])
    rc, out, err = finish(p, 60, "refused")
    took = time.monotonic() - start
    check(rc == 255, f"refused: exit {rc}\n{out}\n{err}")
    last = err.strip().splitlines()[-1]
    check(last.startswith(f"ddprun: error: host {addr(4)}: ssh failed") and "refused" in last,
          f"refused: last line '{last}'\n{err}")
    no_leftovers(c, "refused")
    print(f"ok a host that refuses ssh: '{last}' after {took:.1f} s")


def basic():
    with SshCluster(4, sshd_on=[1, 2, 3]) as c:
        for case in (two_by_two, uneven, c10d, sigterm, killed_launcher, lost_connection,
                     worker_failure, refused):
            out_dir = ddptest.temp_dir()
            try:
                case(c, out_dir)
            finally:
                ddptest.remove_tree(out_dir)


def torch_job():
    ddptest.require_torch()
    out_dir = ddptest.temp_dir()
    try:
        with SshCluster(2) as c:
            hosts = c.hostfile([f"{addr(1)} slots=2", f"{addr(2)} slots=1"])
            # Gloo finds its address from the host name (127.0.0.1 in every namespace): GLOO_*
            # variables are forwarded to the hosts by default.
            p = c.launch(["--hostfile", hosts, *PY, TRAIN, out_dir],
                         env={"GLOO_SOCKET_IFNAME": "eth0"})
            rc, out, err = finish(p, 120, "torch launch")
            check(rc == 0, f"torch: exit {rc}\n{out}\n{err}")
            results = [json.load(open(os.path.join(out_dir, f"result_rank{r}.json")))
                       for r in range(3)]
            check({r["world_size"] for r in results} == {3}, "torch: world sizes")
            check(len({tuple(r["params"]) for r in results}) == 1, "torch: parameters differ")
            no_leftovers(c, "torch")
        print("ok PyTorch gloo DDP across 2 hosts (2 + 1 ranks) from one ddprun --hostfile")
    finally:
        ddptest.remove_tree(out_dir)


ssh_rig.require_ssh()
{"basic": basic, "torch": torch_job}[sys.argv[1] if len(sys.argv) > 1 else "basic"]()
