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
from inprocess_rig import (agent_args, check_kept_workers, check_resumed, check_trained_once,
                           held_pid, records, wait_committed, wait_steps)
from netns_rig import Cluster, check_no_processes

HOLD_STEP = 6
# The last step the survivors commit at world 3 when the kill lands at each moment.
LAST_COMMITTED = {"step": HOLD_STEP - 1, "between": HOLD_STEP, "commit": HOLD_STEP}


def kill_at(moment, c, out_dir, env, tag):
    for n in (1, 2, 3):
        extra = ["--hold", f"{moment}:{HOLD_STEP}"] if n == 3 else []
        c.start_node(n, agent_args(f"moment-{moment}-{tag}", out_dir, n, 0, extra), env)
    held = ddptest.wait_until(lambda: held_pid(out_dir, 3), 120, 0.02)
    check(held, f"{moment}: node 3's worker never reached the moment")
    wait_committed(out_dir, (1, 2), LAST_COMMITTED[moment], moment)
    before = {n: {r["pid"] for r in records(out_dir, n)} for n in (1, 2)}
    killed_at = time.time()
    os.killpg(c.agents_by_node[3].pid, signal.SIGKILL)
    os.kill(held, signal.SIGKILL)
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
    check_resumed(out_dir, (1, 2), before, LAST_COMMITTED[moment], moment)
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
