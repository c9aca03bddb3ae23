"""What the tests of --recovery=inprocess on the netns rig share: the agents' arguments for a job
of inprocess_worker.py, and readers and checks of its records and the agents' event logs."""

import glob
import json
import os
import signal
import uuid

import ddptest
import netns_rig
from ddptest import check

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "inprocess_worker.py")


def agent_args(rdzv_id, out_dir, node, max_restarts, worker_args=(), nnodes="2:3", conf="",
               reform_timeout=90):
    """ddprun's arguments for node `node` of a job of inprocess_worker.py writing to out_dir."""
    args = netns_rig.c10d_args(nnodes, rdzv_id, f"reform_timeout={reform_timeout}" + conf)
    args[args.index("--python") + 1] = ddptest.TORCH_PYTHON
    log = os.path.join(out_dir, f"events_n{node}.jsonl")
    return args + ["--recovery=inprocess", f"--max_restarts={max_restarts}", f"--event_log={log}",
                   WORKER, out_dir, "--node", str(node), *worker_args]


def records(out_dir, node=None):
    result = []
    for path in glob.glob(os.path.join(out_dir, f"records_n{node or '*'}_p*.jsonl")):
        with open(path) as f:
            result += [json.loads(line) for line in f if line.endswith("\n")]
    return sorted(result, key=lambda r: r["time"])


def events(out_dir, node):
    with open(os.path.join(out_dir, f"events_n{node}.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def wait_steps(out_dir, world, count, after, what):
    """Waits until every rank of `world` has committed `count` steps at that world after
    `after`; returns those step records."""
    def done():
        steps = [r for r in records(out_dir) if r["kind"] == "step" and r["world"] == world and
                 r["time"] > after]
        ranks = {r["rank"] for r in steps}
        per_rank = [sum(1 for r in steps if r["rank"] == k) for k in ranks]
        return steps if len(ranks) == world and min(per_rank) >= count else None
    found = ddptest.wait_until(done, 120, 0.05)
    check(found, f"{what}: not every rank committed {count} steps at world {world}")
    return found


def check_trained_once(out_dir, what):
    """Per process: committed steps strictly increase (none done twice); after every entry into
    train(), every rank held the same parameter bits."""
    by_pid = {}
    for r in records(out_dir):
        by_pid.setdefault(r["pid"], []).append(r)
    for pid, rs in by_pid.items():
        steps = [r["step"] for r in rs if r["kind"] == "step"]
        check(all(b > a for a, b in zip(steps, steps[1:])),
              f"{what}: pid {pid} committed a step twice: {steps}")
        for r in rs:
            if r["kind"] in ("entry", "end"):
                check(r["sum_min"] == r["sum_max"],
                      f"{what}: parameters differ across ranks at {r}")
    return by_pid


def check_kept_workers(out_dir, nodes, what):
    """The agents of `nodes` started their workers once, spent no restart, and logged one reform
    caused by the lost node."""
    for n in nodes:
        log = events(out_dir, n)
        names = [e["event"] for e in log]
        check(names.count("workers_started") == 1 and "restart" not in names,
              f"{what}: node {n} restarted its workers: {names}")
        reforms = [e for e in log if e["event"] == "reform"]
        check(len(reforms) == 1 and reforms[0]["cause"] == "node_lost",
              f"{what}: node {n} reform events: {reforms}")


def held_pid(out_dir, node):
    """The pid node `node`'s worker wrote when it reached its --hold moment; None before."""
    path = os.path.join(out_dir, f"held_n{node}")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return int(f.read())


def wait_committed(out_dir, nodes, step, what):
    """Waits until the workers of `nodes` have committed `step` as their last step (they then
    wait in a collective a held worker never joins)."""
    last = lambda n: max([r["step"] for r in records(out_dir, n) if r["kind"] == "step"],
                         default=-1)
    check(ddptest.wait_until(lambda: all(last(n) == step for n in nodes), 60, 0.02),
          f"{what}: the workers of nodes {nodes} did not commit step {step}: "
          f"{ {n: last(n) for n in nodes} }")


def check_resumed(out_dir, nodes, pids, last_committed, what):
    """After one node's loss: each of `nodes` kept its worker (`pids`: node -> its pids before),
    committed up to `last_committed` at world 3, entered train() once at world 2 at the step
    after it (no committed step redone, none skipped) and ended at world 2."""
    for n in nodes:
        rs = records(out_dir, n)
        check({r["pid"] for r in rs} == pids[n],
              f"{what}: node {n}'s worker changed: {pids[n]} -> { {r['pid'] for r in rs} }")
        at_3 = [r["step"] for r in rs if r["kind"] == "step" and r["world"] == 3]
        entries = [r for r in rs if r["kind"] == "entry" and r["world"] == 2]
        check(len(entries) == 1, f"{what}: node {n} entered train() at world 2: {entries}")
        check(max(at_3) == last_committed and entries[0]["step"] == last_committed + 1,
              f"{what}: node {n} committed up to {max(at_3)} at world 3 and resumed at "
              f"{entries[0]['step']} (expected {last_committed} and one past it)")
        ends = [r for r in rs if r["kind"] == "end"]
        check(len(ends) == 1 and ends[0]["world"] == 2, f"{what}: node {n} end: {ends}")


def stderr_logs(out_dir, node, local_rank):
    """{attempt folder name: stderr.log text} of `local_rank` under node's --log_dir."""
    pattern = os.path.join(out_dir, f"logs_n{node}", "*", "attempt_*", str(local_rank),
                           "stderr.log")
    result = {}
    for path in glob.glob(pattern):
        with open(path) as f:
            result[os.path.basename(os.path.dirname(os.path.dirname(path)))] = f.read()
    return result


def loopback_torch_job_env():
    """For loopback tests of PyTorch jobs: skips without torch; returns (tag, env): the agents'
    environment, gloo on lo and DDP_TEST_TAG=tag, by which check_no_processes() finds what is
    left (netns_rig.torch_job_env's twin for one host)."""
    ddptest.require_torch()
    tag = uuid.uuid4().hex[:12]
    return tag, {"GLOO_SOCKET_IFNAME": "lo", "DDP_TEST_TAG": tag}


class LoopbackAgents(dict):
    """ddprun agents on this host by node (start()), each one's output in
    out_dir/agent_n<node>.log (a full pipe nobody reads would stall it); kill_all(), or leaving
    `with LoopbackAgents(...) as agents:`, SIGKILLs whatever still runs."""

    def __init__(self, out_dir, env):
        super().__init__()
        self.out_dir, self.env = out_dir, env

    def start(self, node, cmd):
        with open(os.path.join(self.out_dir, f"agent_n{node}.log"), "w") as out:
            self[node] = ddptest.spawn(cmd, env=self.env, stdout=out,
                                       stderr=ddptest.subprocess.STDOUT)

    def finish(self, nodes, what):
        """Waits up to 120 s for each of `nodes`' agents; fails unless each exits 0."""
        for node in nodes:
            try:
                code = self[node].wait(timeout=120)
            except ddptest.subprocess.TimeoutExpired:
                ddptest.fail(f"{what}: agent {node} did not finish in 120 s")
            with open(os.path.join(self.out_dir, f"agent_n{node}.log")) as f:
                check(code == 0, f"{what}: agent {node} exited {code}\n{f.read()[-3000:]}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.kill_all()

    def kill_all(self):
        for proc in self.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
