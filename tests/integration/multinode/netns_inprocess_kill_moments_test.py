"""A node SIGKILLed at a chosen moment of training, under --recovery=inprocess: three netns nodes
under c10d, real PyTorch 1.13 gloo DDP workers training through ddprun.elastic
(inprocess_worker.py). The argument names the moment (step, between or commit): node 3's worker
holds there at step 6 (--hold, the worker writes its pid to a file and blocks), and the test then
SIGKILLs node 3's agent and that worker, so the kill lands exactly at that moment:

  step     inside step 6, before its backward pass: the survivors wait in step 6's gradient
           all_reduce, so step 6 is in flight and nobody has committed it
  between  after step 6's commit: the survivors have committed 6 and wait in step 7's first
           collective
  commit   inside node 3's commit of step 6 (counted, its snapshot not written): the survivors
           have committed 6 and wait in step 7's first collective

The survivors' workers keep their PIDs, each re-forms once at world 2 and resumes at the step
after its last commit (the one in flight is the only one done again: none committed is redone,
none skipped), every rank holds the same parameter bits after the re-form and at the end (CRC32
all-reduced as min and max), no restart is spent (--max_restarts=0 would end the job), and the
agents' event logs say node_lost, then one reform caused by it."""

import os
import signal
import sys
import time

import ddptest
import netns_rig
from ddptest import check
from inprocess_rig import (agent_args, check_kept_workers, check_trained_once, records,
                           wait_steps)
from netns_rig import Cluster, check_no_processes

HOLD_STEP = 6
# The last step the survivors commit at world 3 when the kill lands at each moment.
LAST_COMMITTED = {"step": HOLD_STEP - 1, "between": HOLD_STEP, "commit": HOLD_STEP}


def read_held_pid(out_dir):
    path = os.path.join(out_dir, "held_n3")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return int(f.read())


def kill_at(moment, c, out_dir, env, tag):
    for n in (1, 2, 3):
        extra = ["--hold", f"{moment}:{HOLD_STEP}"] if n == 3 else []
        c.start_node(n, agent_args(f"moment-{moment}-{tag}", out_dir, n, 0, extra), env)
    held = ddptest.wait_until(lambda: read_held_pid(out_dir), 120, 0.02)
    check(held, f"{moment}: node 3's worker never reached the moment")
    # The survivors reach the collective node 3 will never join, and wait there.
    survivors_waiting = lambda: all(
        max([r["step"] for r in records(out_dir, n) if r["kind"] == "step"], default=-1) ==
        LAST_COMMITTED[moment] for n in (1, 2))
    check(ddptest.wait_until(survivors_waiting, 60, 0.02),
          f"{moment}: the survivors did not commit step {LAST_COMMITTED[moment]}")
    before = {n: {r["pid"] for r in records(out_dir, n)} for n in (1, 2)}
    killed_at = time.time()
    os.killpg(c.agents_by_node[3].pid, signal.SIGKILL)
    os.kill(read_held_pid(out_dir), signal.SIGKILL)
    c.agents_by_node[3].wait()

    steps = wait_steps(out_dir, 2, 3, killed_at, f"{moment}: world 2")
    first = min(r["time"] for r in steps) - killed_at
    print(f"{moment}: first step at world 2 completed {first:.2f} s after the SIGKILL",
          flush=True)
    open(os.path.join(out_dir, "stop"), "w").close()
    for n in (1, 2):
        rc, err = netns_rig.finish(c.agents_by_node[n], 120, f"{moment}: agent on node {n}")
        check(rc == 0, f"{moment}: agent on node {n} exited {rc}\n{err[-3000:]}")

    check_trained_once(out_dir, moment)
    for n in (1, 2):
        rs = records(out_dir, n)
        check({r["pid"] for r in rs} == before[n],
              f"{moment}: node {n}'s worker changed: {before[n]} -> { {r['pid'] for r in rs} }")
        at_3 = [r["step"] for r in rs if r["kind"] == "step" and r["world"] == 3]
        entries = [r for r in rs if r["kind"] == "entry" and r["world"] == 2]
        check(len(entries) == 1, f"{moment}: node {n} entered train() at world 2: {entries}")
        check(max(at_3) == LAST_COMMITTED[moment] and entries[0]["step"] == max(at_3) + 1,
              f"{moment}: node {n} committed up to {max(at_3)} at world 3 and resumed at "
              f"{entries[0]['step']} (expected {LAST_COMMITTED[moment]} and one past it)")
        ends = [r for r in rs if r["kind"] == "end"]
        check(len(ends) == 1 and ends[0]["world"] == 2, f"{moment}: node {n} end: {ends}")
    victim = [r["step"] for r in records(out_dir, 3) if r["kind"] == "step"]
    check(max(victim) == (HOLD_STEP if moment == "between" else HOLD_STEP - 1),
          f"{moment}: node 3 recorded steps {victim}")
    check_kept_workers(out_dir, (1, 2), moment)
    check_no_processes(tag, moment)


moment = sys.argv[1]
check(moment in LAST_COMMITTED, f"usage: {sys.argv[0]} step|between|commit")
tag, env = netns_rig.torch_job_env()
out = ddptest.temp_dir()
try:
    with Cluster(3) as cluster:
        kill_at(moment, cluster, out, env, tag)
        print(f"ok SIGKILL of node 3 {moment}: survivors kept their workers, re-formed at world 2 "
              f"from their last commit, equal parameters", flush=True)
finally:
    ddptest.remove_tree(out)
