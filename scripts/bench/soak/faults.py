"""The soak's fault kinds. Each injector takes the running Soak, does the damage, waits for the
job to be training again (or to end, where the fault leaves it no way on), and returns a Fault:
what was done, where, when, how long recovery took, and which event the agents must have logged
for it (None: nothing an agent could see)."""

import os
import signal
import time
from dataclasses import dataclass, field

import cluster


@dataclass
class Fault:
    kind: str
    t: float                      # when the damage was done (time.time())
    node: int = 0
    pid: int = 0
    recovery_s: float = None      # fault -> first completed step of a group entered after it
    # The part of recovery_s after the agents' own verdict (verdict.py: the last of the expected
    # events, each at its first record after the fault); None for faults no agent has to judge.
    after_detection_s: float = None
    job_restart_s: float = None   # c10d store_host_kill: the fault -> the next job's first step
    expect: list = field(default_factory=list)  # [(node or 0 for any survivor, event, fields)]
    note: str = ""


def _pick_worker(soak, node):
    agent = soak.agents.get(node)
    workers = agent.workers() if agent and agent.is_running() else []
    return soak.rng.choice(workers) if workers else 0


def _worker_fault(soak, kind, damage, expect):
    """One worker of a node: `damage(pid)`, then training again at the full world."""
    node = soak.pick_node(allow_store_host=True)
    pid = _pick_worker(soak, node)
    if not pid:
        return None
    t = time.time()
    damage(pid)
    fault = Fault(kind, t, node, pid, expect=[(node, *expect(pid))])
    fault.recovery_s = soak.wait_training(t, soak.world())
    return fault


def worker_kill(soak):
    return _worker_fault(soak, "worker_kill", lambda pid: os.kill(pid, signal.SIGKILL),
                         lambda pid: ("worker_exited", {"pid": pid, "signal": "SIGKILL"}))


def worker_error(soak):
    """The worker exits 3, asked as its job takes such requests (jobs.py)."""
    return _worker_fault(soak, "worker_error", lambda pid: soak.job.fail(soak.job_dir, pid),
                         lambda pid: ("worker_exited", {"pid": pid, "exit_code": 3}))


def worker_stop(soak):
    """SIGSTOP: the hang path (--hang_timeout) finds the stopped worker and replaces it."""
    return _worker_fault(soak, "worker_stop", lambda pid: os.kill(pid, signal.SIGSTOP),
                         lambda pid: ("hang", {}))


def node_kill(soak):
    """A node's agent and workers SIGKILLed at once; the node starts again a few seconds later."""
    node = soak.pick_node()
    if not node:
        return None
    t = time.time()
    soak.kill_node(node)
    fault = Fault("node_kill", t, node, expect=[(0, "node_lost", {})])
    fault.recovery_s = soak.wait_training(t, soak.world())
    soak.restart_node_later(node)
    return fault


def two_nodes(soak):
    """Two nodes lost at once."""
    first = soak.pick_node(losing=2)
    second = soak.pick_node(exclude={first}) if first else 0
    if not second:
        return None
    t = time.time()
    soak.kill_node(first)
    soak.kill_node(second)
    fault = Fault("two_nodes", t, first, note=f"nodes {first} and {second}",
                  expect=[(0, "node_lost", {})])
    fault.recovery_s = soak.wait_training(t, soak.world())
    soak.restart_node_later(first)
    soak.restart_node_later(second)
    return fault


def during_recovery(soak):
    """A worker failure, and while the job recovers from it, a node lost."""
    victim = soak.pick_node()
    other = soak.pick_node(allow_store_host=True, exclude={victim}) if victim else 0
    pid = _pick_worker(soak, other) if other else 0
    if not pid:
        return None
    t = time.time()
    os.kill(pid, signal.SIGKILL)
    time.sleep(soak.rng.uniform(0.1, 0.8))
    soak.kill_node(victim)
    fault = Fault("during_recovery", t, victim, pid,
                  note=f"worker {pid} on node {other} killed, then node {victim}",
                  expect=[(other, "worker_exited", {"pid": pid, "signal": "SIGKILL"}),
                          (0, "node_lost", {})])
    fault.recovery_s = soak.wait_training(t, soak.world())
    soak.restart_node_later(victim)
    return fault


def link_short(soak):
    """A link down for less than the heartbeat window: the job must ride through it."""
    node = soak.pick_node()
    if not node:
        return None
    t = time.time()
    cluster.rig("cut", str(node))
    time.sleep(soak.short_cut_s)
    cluster.rig("heal", str(node))
    healed = time.time()
    fault = Fault("link_short", t, node, note=f"{soak.short_cut_s:.1f} s")
    # From the cut to the first step after the heal (a step in flight may end during the cut).
    fault.recovery_s = healed - t + soak.wait_step_after(healed)
    return fault


def link_long(soak):
    """A link down past the heartbeat window: the node is lost; healed, it comes back."""
    node = soak.pick_node()
    if not node:
        return None
    t = time.time()
    cluster.rig("cut", str(node))
    soak.lost.add(node)
    fault = Fault("link_long", t, node, expect=[(0, "node_lost", {})])
    fault.recovery_s = soak.wait_training(t, soak.world())
    cluster.rig("heal", str(node))
    soak.lost.discard(node)
    soak.rejoin_after_heal(node)
    return fault


def store_host_kill(soak):
    """The node that hosts the store dies. c10d: the rendezvous store is gone, so the job ends
    (every agent with a clear error) and the soak starts the next job. etcd: the node hosting the
    workers' store is an ordinary loss."""
    node = soak.store_host()
    if not node or (soak.backend == "etcd" and not soak.pick_node(exclude={node})):
        return None
    running = [n for n in soak.live_nodes() if n != node]
    t = time.time()
    soak.kill_node(node)
    if soak.backend == "c10d":
        # Not a recovery: the job ends (every agent says why) and the soak starts the next job.
        fault = Fault("store_host_kill", t, node, note="job ends; next job started")
        soak.expect_job_end(running)
        fault.job_restart_s = soak.wait_training(t, soak.world())
        return fault
    fault = Fault("store_host_kill", t, node, expect=[(0, "node_lost", {})])
    fault.recovery_s = soak.wait_training(t, soak.world())
    soak.restart_node_later(node)
    return fault


def etcd_member(soak):
    """An etcd member SIGKILLed and started again: the job goes on."""
    member = soak.rng.randrange(3)
    t = time.time()
    soak.etcd.kill(member)
    time.sleep(soak.rng.uniform(1.0, 3.0))
    soak.etcd.start(member, state="existing")
    fault = Fault("etcd_member", t, note=f"member {member}")
    fault.recovery_s = soak.wait_step_after(t)
    return fault


def full_disk(soak):
    """A node's log directory (its own tmpfs) full for a few seconds: the job goes on."""
    node = soak.pick_node(allow_store_host=True)
    if not node:
        return None
    t = time.time()
    soak.tmpfs[node].fill()
    time.sleep(soak.rng.uniform(1.0, 3.0))
    soak.tmpfs[node].drain()
    fault = Fault("full_disk", t, node)
    fault.recovery_s = soak.wait_step_after(t)
    return fault


KINDS = {
    "worker_kill": worker_kill,
    "worker_error": worker_error,
    "worker_stop": worker_stop,
    "node_kill": node_kill,
    "store_host_kill": store_host_kill,
    "link_short": link_short,
    "link_long": link_long,
    "etcd_member": etcd_member,
    "full_disk": full_disk,
    "during_recovery": during_recovery,
    "two_nodes": two_nodes,
}


def kinds_for(backend):
    return [k for k in KINDS if backend == "etcd" or k != "etcd_member"]
