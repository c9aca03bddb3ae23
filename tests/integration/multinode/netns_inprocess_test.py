"""In-process recovery (--recovery=inprocess) with real PyTorch 1.13 gloo DDP workers that train
through ddprun.elastic (inprocess_worker.py), on network-namespace nodes under c10d. One rig
bring-up (four nodes), three jobs:

node_loss: node 3's agent is SIGKILLed mid-training (its worker dies with it, by the
  parent-death signal). The survivors' workers keep their PIDs, train on at world 2 from the
  step they had committed (no committed step is done twice), hold bitwise-equal parameters after
  the re-form (CRC32 all-reduced as min and max), and no restart is spent (--max_restarts=0
  would end the job). The agents' event logs say node_lost, then reform with cause node_lost.
worker_faults (--max_restarts=2 --hang_timeout=2): the worker of rank 1 exits 3 with every node
  alive: that node starts a new worker, which joins as a newcomer and receives the state; the
  other nodes' workers keep their PIDs and re-form (cause peer_failed). Then a worker of another
  node is stopped with SIGSTOP: its agent names the hang, replaces that worker, and the others
  re-form again; the third node's worker lives through both.
join: under --nnodes=3:4 a fourth node's agent starts mid-training: the three workers keep their
  PIDs and re-form at a commit (cause node_waiting); the new worker receives the state from a
  peer and the job trains at world 4.
Every job ends with exit 0 on every agent and leaves no process behind."""

import os
import signal
import time

import ddptest
import netns_rig
from ddptest import check
from inprocess_rig import (agent_args, check_kept_workers, check_trained_once, events, records,
                           wait_steps)
from netns_rig import Cluster, check_no_processes

def finish_job(c, out_dir, nodes, what):
    open(os.path.join(out_dir, "stop"), "w").close()
    for n in nodes:
        rc, err = netns_rig.finish(c.agents_by_node[n], 120, f"{what}: agent on node {n}")
        check(rc == 0, f"{what}: agent on node {n} exited {rc}\n{err[-3000:]}")


def node_loss(c, out_dir, env, tag):
    for n in (1, 2, 3):
        c.start_node(n, agent_args(f"loss-{tag}", out_dir, n, 0), env)
    wait_steps(out_dir, 3, 5, 0.0, "node_loss: world 3")
    before = {n: {r["pid"] for r in records(out_dir, n)} for n in (1, 2)}
    killed_at = time.time()
    os.killpg(c.agents_by_node[3].pid, signal.SIGKILL)
    c.agents_by_node[3].wait()
    steps = wait_steps(out_dir, 2, 3, killed_at, "node_loss: world 2")
    first = min(r["time"] for r in steps) - killed_at
    print(f"node_loss: first step at world 2 completed {first:.2f} s after the SIGKILL",
          flush=True)
    for n in (1, 2):
        check({r["pid"] for r in records(out_dir, n)} == before[n],
              f"node_loss: node {n}'s worker changed: {before[n]} -> "
              f"{ {r['pid'] for r in records(out_dir, n)} }")
    entries = [r for r in records(out_dir) if r["kind"] == "entry" and r["world"] == 2]
    check(len(entries) == 2, f"node_loss: entries at world 2: {entries}")
    finish_job(c, out_dir, (1, 2), "node_loss")
    check_trained_once(out_dir, "node_loss")
    check_kept_workers(out_dir, (1, 2), "node_loss")
    check_no_processes(tag, "node_loss")


def join(c, out_dir, env, tag):
    args = lambda n: agent_args(f"join-{tag}", out_dir, n, 0, nnodes="3:4",
                                conf=",last_call_timeout=1")
    for n in (1, 2, 3):
        c.start_node(n, args(n), env)
    wait_steps(out_dir, 3, 5, 0.0, "join: world 3")
    before = {n: {r["pid"] for r in records(out_dir, n)} for n in (1, 2, 3)}
    joined_at = time.time()
    c.start_node(4, args(4), env)
    steps = wait_steps(out_dir, 4, 3, joined_at, "join: world 4")
    newcomer = records(out_dir, 4)[0]
    first = min(r["time"] for r in steps if r["node"] == 4)
    print(f"join: the new worker committed its first step at world 4 "
          f"{first - newcomer['started']:.2f} s after its start, "
          f"{first - newcomer['imported']:.2f} s after `import torch`", flush=True)
    check(newcomer["kind"] == "entry" and newcomer["world"] == 4 and newcomer["step"] >= 5,
          f"join: the new node's worker did not receive the state: {newcomer}")
    for n in (1, 2, 3):
        check({r["pid"] for r in records(out_dir, n)} == before[n],
              f"join: node {n}'s worker changed")
    finish_job(c, out_dir, (1, 2, 3, 4), "join")
    check_trained_once(out_dir, "join")
    for n in (1, 2, 3):
        reforms = [e for e in events(out_dir, n) if e["event"] == "reform"]
        check(len(reforms) == 1 and reforms[0]["cause"] == "node_waiting",
              f"join: node {n} reform events: {reforms}")
    check_no_processes(tag, "join")


def replaced_worker(out_dir, node, old_pid, what):
    """Waits for `node`'s worker after `old_pid`; checks that it received the state (its first
    entry into train() is past step 8) and returns that entry."""
    fresh = lambda: [r for r in records(out_dir, node) if r["pid"] not in old_pid]
    check(ddptest.wait_until(fresh, 120, 0.05), f"{what}: node {node}'s worker was not replaced")
    entry = fresh()[0]
    check(entry["kind"] == "entry" and entry["step"] >= 8,
          f"{what}: the new worker did not receive the state: {entry}")
    return entry


def worker_faults(c, out_dir, env, tag):
    args = lambda n: agent_args(f"faults-{tag}", out_dir, n, 2, ["--fail", "1:8"])
    for n in (1, 2, 3):
        c.start_node(n, ["--hang_timeout=2", *args(n)], env)
    wait_steps(out_dir, 3, 5, 0.0, "worker_exit: world 3")
    failed = [r for r in records(out_dir) if r["rank"] == 1 and r["kind"] == "entry"][0]
    entry = replaced_worker(out_dir, failed["node"], {failed["pid"]}, "worker_exit")
    wait_steps(out_dir, 3, 3, entry["time"], "worker_exit: world 3 after the exit")
    # A worker on another node stopped: --hang_timeout names it, its agent replaces it.
    stopped = [r for r in records(out_dir) if r["node"] != failed["node"]][0]
    os.kill(stopped["pid"], signal.SIGSTOP)
    entry = replaced_worker(out_dir, stopped["node"], {stopped["pid"]}, "SIGSTOP")
    wait_steps(out_dir, 3, 3, entry["time"], "SIGSTOP: world 3 after the replacement")
    finish_job(c, out_dir, (1, 2, 3), "worker_faults")
    check_trained_once(out_dir, "worker_faults")
    bystander = ({1, 2, 3} - {failed["node"], stopped["node"]}).pop()
    for n in (1, 2, 3):
        pids = {r["pid"] for r in records(out_dir, n)}
        check(len(pids) == (1 if n == bystander else 2),
              f"worker_faults: node {n} ran workers {pids}")
    reforms = [e["cause"] for e in events(out_dir, bystander) if e["event"] == "reform"]
    check(reforms == ["peer_failed", "peer_failed"],
          f"worker_faults: node {bystander} reform causes: {reforms}")
    hangs = [e for e in events(out_dir, stopped["node"]) if e["event"] == "hang"]
    check(len(hangs) == 1, f"SIGSTOP: node {stopped['node']} hang events: {hangs}")
    check_no_processes(tag, "worker_faults")


tag, env = netns_rig.torch_job_env()
dirs = [ddptest.temp_dir(), ddptest.temp_dir(), ddptest.temp_dir()]
try:
    with Cluster(4) as c:
        node_loss(c, dirs[0], env, tag)
        print("ok SIGKILL of node 3: survivors kept their workers, re-formed at world 2, "
              "no step redone, equal parameters", flush=True)
        worker_faults(c, dirs[1], env, tag)
        print("ok worker exit 3, then a worker stopped under --hang_timeout: only that worker "
              "started again each time; the others re-formed", flush=True)
        join(c, dirs[2], env, tag)
        print("ok a fourth node joined at a commit, received the state, trained at world 4",
              flush=True)
finally:
    for d in dirs:
        ddptest.remove_tree(d)
