"""Elastic c10d faults across network namespaces (keep_alive_interval=1, max_attempt=2):
SIGKILL one agent of three (--nnodes=2:3) and cut another node's link: the others restart at
WORLD_SIZE 4 and finish; a 4th node joining a running --nnodes=2:4 job: scale-up restart with
no restart spent; the store host killed: every other agent exits with a clear error."""

import os
import signal
import sys

import ddptest
import netns_rig
from ddptest import check
from netns_rig import Cluster

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hold_worker.py")


def world_records(out_dir, world):
    return [r for r in netns_rig.records(out_dir) if r["WORLD_SIZE"] == str(world)]


def wait_world(out_dir, world, count, what):
    ok = ddptest.wait_until(lambda: len(world_records(out_dir, world)) >= count, 60, 0.1)
    check(ok, f"{what}: only {len(world_records(out_dir, world))} of {count} workers "
              f"started at WORLD_SIZE {world}")


def check_ranks(out_dir, world, what):
    ranks = sorted(int(r["RANK"]) for r in world_records(out_dir, world))
    check(ranks == list(range(world)), f"{what}: ranks at WORLD_SIZE {world}: {ranks}")


def lose_a_node(how):
    out_dir = ddptest.temp_dir()
    try:
        with Cluster(3) as c:
            args = netns_rig.c10d_args("2:3", f"lose-{how}", nproc=2) + [WORKER, out_dir, "6"]
            agents = {n: c.start(n, args) for n in (1, 2, 3)}
            wait_world(out_dir, 6, 6, how)
            if how == "kill":
                os.killpg(agents[3].pid, signal.SIGKILL)
            else:
                c.cut(3)
            for n in (1, 2):
                rc, err = netns_rig.finish(agents[n], 60, f"survivor on node {n} ({how})")
                check(rc == 0, f"{how}: survivor on node {n} exited {rc}\n{err}")
                check("lost" in err, f"{how}: survivor on node {n} never logged the loss\n{err}")
            check_ranks(out_dir, 4, how)
    finally:
        ddptest.remove_tree(out_dir)


def scale_up():
    out_dir = ddptest.temp_dir()
    try:
        with Cluster(4) as c:
            args = netns_rig.c10d_args("2:4", "grow", "last_call_timeout=1") + [WORKER, out_dir, "3"]
            agents = [c.start(n, args) for n in (1, 2, 3)]
            wait_world(out_dir, 3, 3, "scale-up")
            agents.append(c.start(4, args))
            for n, p in enumerate(agents, 1):
                rc, err = netns_rig.finish(p, 60, f"agent on node {n} (scale-up)")
                check(rc == 0, f"scale-up: agent on node {n} exited {rc}\n{err}")
            check_ranks(out_dir, 4, "scale-up")
            counts = {r["TORCHELASTIC_RESTART_COUNT"] for r in world_records(out_dir, 4)}
            check(counts == {"0"}, f"scale-up spent a restart: restart counts {counts}")
    finally:
        ddptest.remove_tree(out_dir)


def store_host_killed():
    out_dir = ddptest.temp_dir()
    try:
        with Cluster(3) as c:
            args = netns_rig.c10d_args("3", "hostdies") + [WORKER, out_dir, "3"]
            agents = {n: c.start(n, args) for n in (1, 2, 3)}
            wait_world(out_dir, 3, 3, "store host killed")
            os.killpg(agents[1].pid, signal.SIGKILL)
            for n in (2, 3):
                rc, err = netns_rig.finish(agents[n], 30, f"agent on node {n} after the host died")
                check(rc != 0, f"agent on node {n} exited 0 after the store host died")
                check("store" in err and "unreachable" in err,
                      f"agent on node {n}: no clear store error\n{err}")
    finally:
        ddptest.remove_tree(out_dir)


netns_rig.require_rig()
which = sys.argv[1:] or ["kill", "cut", "scale_up", "host"]
if "kill" in which:
    lose_a_node("kill")
    print("ok SIGKILL of one agent: survivors restarted at WORLD_SIZE 4 and finished")
if "cut" in which:
    lose_a_node("cut")
    print("ok cut link: heartbeats noticed; survivors restarted at WORLD_SIZE 4 and finished")
if "scale_up" in which:
    scale_up()
    print("ok a 4th node joined a running 2:4 job: WORLD_SIZE 4, no restart spent")
if "host" in which:
    store_host_killed()
    print("ok store host killed: the other agents exited with a clear error")
