"""In-process recovery of the native path: ddp-train workers (libddp, Gloo over the nodes' eth0)
under ddprun --recovery=inprocess on network-namespace nodes under c10d, with no flag on
ddp-train for it. Mid-training, node 3 is lost:
- sigkill: its agent is SIGKILLed (its worker dies with it, by the parent-death signal, and the
  survivors' Gloo collectives with it fail when its connections close);
- link_cut: its link is cut (no FIN or RST reaches anyone): the survivors' collectives with it
  stay blocked until their agents judge the node lost and hand over the smaller round, whose
  arrival aborts their Gloo groups (GlooProcessGroup::abort).
The survivors:
- keep their worker PIDs (every `reform` line of a node names the same pid; one workers_started
  per agent, no restart: --max_restarts=0 would end the job);
- go on from the step they had committed: the step the re-form syncs to is at least the last step
  printed at world 3 (a step is printed after its commit), so no committed step is done twice;
- hold bitwise-equal parameters after every re-form (CRC32 all-reduced as min and max);
- train to the end at world 2 with a sane test accuracy.
The agents' event logs say node_lost, then reform with cause node_lost. No process is left.

Usage: netns_inprocess_train_test.py [sigkill|link_cut]"""

import os
import re
import signal
import subprocess
import sys
import threading
import time

import ddptest
import netns_rig
from ddptest import check
from inprocess_rig import check_kept_workers
from netns_rig import Cluster, check_no_processes

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "train"))
import train_common as tc  # noqa: E402

STEPS = 400
REFORM = re.compile(r"reform round=(\d+) rank=(\d+) world_size=(\d+) pid=(\d+) step=(\d+) "
                    r"commits=(\d+) from_rank=(\d+) params_crc_min=(\d+) params_crc_max=(\d+)")
PROGRESS = re.compile(r"epoch=\d+/\d+ step=(\d+)/")


class Lines:
    """Every stdout line of an agent, with the time it arrived, and its stderr (each read on a
    thread of its own, so neither pipe fills)."""

    def __init__(self, proc):
        self.proc = proc
        self.lines = []
        self.err = []
        self.threads = [threading.Thread(target=self._read, daemon=True),
                        threading.Thread(target=lambda: self.err.extend(proc.stderr),
                                         daemon=True)]
        for t in self.threads:
            t.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append((time.time(), line.rstrip("\n")))

    def finish(self, timeout, what):
        """Waits for the agent and both pipes' ends; returns (rc, stderr)."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            ddptest.fail(f"{what} did not exit within {timeout} s\n{''.join(self.err)[-3000:]}")
        for t in self.threads:
            t.join(10)
        return self.proc.returncode, "".join(self.err)


def agent_args(node, out_dir):
    args = netns_rig.c10d_args("2:3", "train-inprocess", "reform_timeout=60")
    python = args.index("--python")
    del args[python:python + 2]
    return args + ["--recovery=inprocess", "--max_restarts=0",
                   f"--event_log={os.path.join(out_dir, f'events_n{node}.jsonl')}", "--no_python",
                   ddptest.bin_path("ddp-train"), *tc.SMALL, "--batch_size", "32", "--seed", "3",
                   "--max_steps", str(STEPS), "--log_every", "1", "--slow_step_ms", "25",
                   "--slow_rank", "0"]


def all_lines(readers):
    return sorted((t, line) for r in readers.values() for t, line in r.lines)


def lose_node_3(c, mode):
    """Takes node 3 away as `mode` says; returns the time it happened."""
    at = time.time()
    if mode == "sigkill":
        os.killpg(c.agents_by_node[3].pid, signal.SIGKILL)
        c.agents_by_node[3].wait()
    else:
        c.cut(3)
    return at


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "sigkill"
    check(mode in ("sigkill", "link_cut"), f"unknown mode {mode!r}: sigkill or link_cut")
    netns_rig.require_rig()
    tc.require_data()
    tag = os.urandom(6).hex()
    env = {"GLOO_SOCKET_IFNAME": "eth0", "DDP_TEST_TAG": tag, "OMP_NUM_THREADS": "1"}
    out_dir = ddptest.temp_dir()
    try:
        with Cluster(3) as c:
            readers = {}
            for n in (1, 2, 3):
                c.start_node(n, agent_args(n, out_dir), env)
                readers[n] = Lines(c.agents_by_node[n])
            steps = lambda: [int(m.group(1)) for _, line in all_lines(readers)
                             if (m := PROGRESS.search(line))]
            check(ddptest.wait_until(lambda: len(steps()) >= 40, 120, 0.05),
                  f"the job did not reach step 40 at world 3: {all_lines(readers)[-20:]}")
            last_at_three = max(steps())
            killed_at = lose_node_3(c, mode)
            errs = {}
            for n in (1, 2):
                rc, errs[n] = readers[n].finish(180, f"agent on node {n}")
                check(rc == 0, f"agent on node {n} exited {rc}\n{errs[n][-3000:]}")
            if mode == "link_cut":  # node 3, cut off, has no job left to find
                os.killpg(c.agents_by_node[3].pid, signal.SIGKILL)
                c.agents_by_node[3].wait()
                c.heal(3)
            for n in (1, 2):
                check("blocked past the hand-over" not in errs[n],
                      f"node {n}'s worker gave its process up\n{errs[n][-3000:]}")
            lines = all_lines(readers)
            reforms = [(t, REFORM.search(line)) for t, line in lines if REFORM.search(line)]
            for _, m in reforms:
                check(m.group(8) == m.group(9), f"parameters differ across ranks: {m.group(0)}")
            after = [(t, m) for t, m in reforms if t > killed_at]
            check(len(after) == 2 and all(m.group(3) == "2" for _, m in after),
                  f"expected one re-form at world 2 on each survivor: {[m.group(0) for _, m in after]}")
            synced = int(after[0][1].group(5))
            check(synced >= last_at_three,
                  f"the re-form went back to step {synced}, before step {last_at_three}, "
                  f"printed (committed) at world 3")
            for n in (1, 2):
                pids = {m.group(4) for t, line in readers[n].lines if (m := REFORM.search(line))}
                check(len(pids) == 1, f"node {n}'s worker changed: pids {pids}\n{errs[n][-3000:]}")
            first = min(t for t, line in lines if t > max(t for t, _ in after) and
                        PROGRESS.search(line))
            print(f"first step at world 2 completed {first - killed_at:.2f} s after the {mode} "
                  f"(synced to step {synced}; last printed at world 3: {last_at_three})",
                  flush=True)
            summary = tc.summary_fields("\n".join(line for _, line in lines))
            check(summary["world_size"] == "2" and summary["steps"] == str(STEPS),
                  f"summary: {summary}")
            check(float(summary["test_accuracy"]) > 0.7, f"test accuracy: {summary}")
            check_kept_workers(out_dir, (1, 2), "ddp-train in-process")
        check_no_processes(tag, "ddp-train in-process")
        print(f"ok {mode} of node 3: the ddp-train survivors kept their processes, re-formed at "
              f"world 2 from the committed step, equal parameters, test_accuracy="
              f"{summary['test_accuracy']}", flush=True)
    finally:
        ddptest.remove_tree(out_dir)


main()
