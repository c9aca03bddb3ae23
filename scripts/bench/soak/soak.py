"""The fault soak (docs/soak.md): one long elastic job on network-namespace nodes, faults injected
at random moments from a printed seed, the job's invariants checked after every fault and at the
end. Prints a table, then one JSON line; exits 1 when an invariant broke (a job lost, parameters
that differ between ranks, progress that went back past the last checkpoint or commit, an orphan,
a missing event), 0 otherwise. Recovery times are figures, never a pass/fail criterion.

Usage (root; scripts/bench/soak.sh wraps it):
  soak.py --bin BUILD/bin [--minutes M] [--seed S] [--backend c10d|etcd]
          [--recovery restart|inprocess] [--job torch|ddp-train] [--start_method spawn|forkserver]
          [--nodes 4] [--min_nodes 2] [--work DIR]
"""
import argparse
import fcntl
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time

import cluster
import faults
import jobs
import verdict


LOCK = "/tmp/ddprun-soak.lock"


class JobEnded(Exception):
    """Every agent of the job has exited while faults were still due."""


class Soak:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.backend = args.backend
        self.job = jobs.JOBS[args.job](args.bin)
        self.nodes = list(range(1, args.nodes + 1))
        self.work = args.work
        self.agents = {}          # node -> Agent (the current one)
        self.all_agents = []      # every agent started, for the RSS/fd figures
        self.pending = {}         # node -> when to start its agent again
        self.lost = set()         # nodes cut off (their agent may still run)
        self.jobs = []            # job directories
        self.jobs_lost = 0
        self.job_notes = []
        self.orphan_pids = set()
        self.suspects = {}
        # The detection settings (docs/soak.md says why these values). A stopped worker cannot
        # be found before the hang timeout, nor a silently cut link before the heartbeat window.
        self.hang_timeout_s = 3
        self.keep_alive_s, self.keep_alive_attempts = 1, 2   # c10d
        self.lease_ttl_s = 3                                  # etcd
        self.short_cut_s = 0.8    # under the heartbeat window (keep_alive 1 s x 2)
        self.tmpfs = {}
        self.etcd = None
        self.agent_count = 0

    # --- the job ---------------------------------------------------------------------------
    def agent_argv(self, node):
        job = len(self.jobs)
        self.agent_count += 1
        common = [os.path.join(self.args.bin, "ddprun"), f"--nnodes={self.args.min_nodes}:"
                  f"{len(self.nodes)}", "--nproc_per_node=1", "--max_restarts=100000",
                  f"--hang_timeout={self.hang_timeout_s}", "--shutdown_timeout=5",
                  f"--event_log={self.work}/events_j{job}_n{node}_a{self.agent_count}.jsonl",
                  f"--log_dir={self.tmpfs[node].path}/j{job}_a{self.agent_count}",
                  "--redirects=3", f"--rdzv_id=soak{job}_{os.getpid()}"]
        if self.backend == "c10d":
            conf = (f"keep_alive_interval={self.keep_alive_s},"
                    f"keep_alive_max_attempt={self.keep_alive_attempts},join_timeout=60")
            common += ["--rdzv_backend=c10d", f"--rdzv_endpoint={cluster.addr(1)}:29400"]
        else:
            conf = f"lease_ttl={self.lease_ttl_s},join_timeout=60"
            common += ["--rdzv_backend=etcd", f"--rdzv_endpoint={self.etcd.endpoints()}"]
        common.append(f"--rdzv_conf={conf}")
        if self.args.recovery == "inprocess":
            common.append("--recovery=inprocess")
        common.append(f"--start_method={self.args.start_method}")
        return [*common, *self.job.worker_argv(self.job_dir, self.args.recovery)]

    def start_agent(self, node):
        index = self.agent_count + 1
        agent = cluster.Agent(node, index, self.agent_argv(node),
                              os.path.join(self.work, f"agent_j{len(self.jobs)}_n{node}_{index}.log"),
                              self.job.env())
        agent.event_log = os.path.join(self.work, f"events_j{len(self.jobs)}_n{node}_a{index}.jsonl")
        self.agents[node] = agent
        self.all_agents.append(agent)
        self.pending.pop(node, None)

    def start_job(self):
        self.job_dir = os.path.join(self.work, f"job{len(self.jobs) + 1}")
        os.makedirs(self.job_dir)
        self.jobs.append(self.job_dir)
        self.records = self.job.records(self.job_dir)
        self.agents = {}
        self.pending = {}
        for node in self.nodes:
            self.start_agent(node)
        self.wait_training(time.time() - 1, self.world(), timeout=120)

    def detection_windows(self):
        """Seconds before an agent can tell, by kind: a stopped worker (the hang timeout) and a
        silently cut link (c10d: the keep-alive window; etcd: the lease, as a cut link refuses
        nothing)."""
        link = (self.keep_alive_s * self.keep_alive_attempts if self.backend == "c10d"
                else self.lease_ttl_s)
        return {"worker_stop": self.hang_timeout_s, "link_long": link}

    def live_nodes(self):
        return [n for n in self.nodes
                if n in self.agents and self.agents[n].is_running() and n not in self.lost]

    def world(self):
        return len(self.live_nodes())

    def store_host(self):
        if self.backend == "c10d":
            return 1
        starts = self.records.starts()
        if not starts:
            return 0
        master = starts[-1].get("master_addr", "")
        return next((n for n in self.live_nodes() if cluster.addr(n) == master), 0)

    def pick_node(self, allow_store_host=False, exclude=frozenset(), losing=1):
        """A live node to damage; 0 when none can be (a node-losing fault keeps min_nodes)."""
        live = [n for n in self.live_nodes() if n not in exclude]
        if not allow_store_host:
            if self.backend == "c10d":
                live = [n for n in live if n != self.store_host()]  # only store_host_kill ends a job
            if self.world() - losing < self.args.min_nodes:
                return 0
        return self.rng.choice(live) if live else 0

    def kill_node(self, node):
        cluster.kill_pids(cluster.namespace_pids(node))
        agent = self.agents.get(node)
        if agent:
            agent.proc.wait()

    def restart_node_later(self, node):
        self.pending[node] = time.time() + self.rng.uniform(2.0, 4.0)

    def rejoin_after_heal(self, node):
        """A node cut off past the heartbeat window: its agent may find its way back by itself;
        otherwise it is replaced."""
        agent = self.agents.get(node)
        if agent and agent.is_running():
            try:
                self.wait_training(time.time(), len(self.nodes) - len(self.pending), timeout=30)
                return
            except TimeoutError:
                self.kill_node(node)
        self.pending[node] = time.time()

    def start_pending(self):
        for node, when in sorted(self.pending.items()):
            if when <= time.time():
                t = time.time()
                self.start_agent(node)
                try:
                    self.recovery.setdefault("node_rejoin", []).append(
                        self.wait_training(t, self.world(), timeout=90))
                except TimeoutError:
                    self.job_failed(f"node {node} did not rejoin within 90 s")

    def expect_job_end(self, running):
        """c10d's store host died: every other agent that was running must exit non-zero, saying
        the store is unreachable. Then the next job starts."""
        for node in running:
            agent = self.agents[node]
            try:
                agent.proc.wait(timeout=60)
            except Exception:
                self.job_failed(f"the agent on node {node} still runs 60 s after the store host died")
                return
            out = agent.output()
            if agent.proc.returncode == 0 or "unreachable" not in out:
                self.job_failed(f"node {node} ended with exit {agent.proc.returncode} and no clear "
                                f"store error after the store host died")
                return
        self.kill_all()
        self.start_job()

    def job_failed(self, why):
        self.jobs_lost += 1
        self.job_notes.append(f"job {len(self.jobs)}: {why}")
        print(f"soak: JOB LOST: {why}", flush=True)
        self.kill_all()
        self.start_job()

    def kill_all(self):
        for node in self.nodes:
            cluster.rig("heal", str(node), check=False)
            self.kill_node(node)
        self.lost.clear()

    # --- waiting on the job's records ----------------------------------------------------------
    def steps(self):
        return self.records.steps()

    def wait_training(self, since, world, timeout=90):
        """Seconds from `since` to the first completed step of a group entered after `since` at
        `world` workers. Raises TimeoutError."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            for s in self.steps():
                if s["entered"] > since and s["world"] == world:
                    return s["t"] - since
            if not any(a.is_running() for a in self.agents.values()):
                raise JobEnded()
            time.sleep(0.05)
        raise TimeoutError(f"no step at world {world} within {timeout} s")

    def wait_step_after(self, since, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            later = [s["t"] for s in self.steps() if s["t"] > since]
            if later:
                return min(later) - since
            time.sleep(0.05)
        raise TimeoutError(f"no step within {timeout} s")

    # --- checks between faults -----------------------------------------------------------------
    def sample(self):
        for agent in self.agents.values():
            if agent.is_running():
                agent.sample(verdict.AGENT_WARMUP_S)
        now = time.time()
        for node in self.nodes:
            live = self.agents.get(node)
            for pid in cluster.namespace_pids(node):
                if not cluster.is_worker(pid):
                    continue
                if live and live.is_running() and cluster.parent(pid) == live.pid:
                    self.suspects.pop(pid, None)
                    continue
                first = self.suspects.setdefault(pid, now)
                if now - first > 10 and pid not in self.orphan_pids:
                    self.orphan_pids.add(pid)
                    self.job_notes.append(f"orphan in node {node}: {pid} parent "
                                          f"{cluster.parent(pid)} {cluster.cmdline(pid)[:120]}")

    def unexpected_exits(self):
        for node, agent in list(self.agents.items()):
            if not agent.is_running() and node not in self.pending and node not in self.lost:
                self.job_notes.append(f"job {len(self.jobs)}: the agent on node {node} exited "
                                      f"{agent.proc.returncode} unasked")
                self.pending[node] = time.time()

    # --- the run ------------------------------------------------------------------------------
    def run(self):
        self.recovery = {}
        self.job_restarts = []
        injected = []
        deadline = time.time() + self.args.minutes * 60
        kinds = faults.kinds_for(self.backend)
        first_pass = kinds[:]
        self.rng.shuffle(first_pass)
        self.start_job()
        while time.time() < deadline or first_pass:
            time.sleep(self.rng.uniform(0.5, 2.5))
            self.sample()
            self.unexpected_exits()
            self.start_pending()
            kind = first_pass[0] if first_pass else self.rng.choice(kinds)
            try:
                fault = faults.KINDS[kind](self)
            except JobEnded:
                self.job_failed(f"every agent exited after {kind}")
                fault = None
            except TimeoutError as e:
                self.job_failed(f"{kind}: {e}")
                fault = None
            if fault is None:
                if first_pass and kind == first_pass[0] and not self.pending:
                    first_pass.append(first_pass.pop(0))  # not possible now: later
                continue
            if first_pass and kind == first_pass[0]:
                first_pass.pop(0)
            fault.job = len(self.jobs)
            injected.append(fault)
            if fault.job_restart_s is not None:
                self.job_restarts.append(fault.job_restart_s)
                outcome = f"next job training {fault.job_restart_s:.2f} s after"
            else:
                self.recovery.setdefault(kind, []).append(fault.recovery_s)
                outcome = f"recovered in {fault.recovery_s:.2f} s"
            print(f"soak: {time.strftime('%H:%M:%S')} {kind:16s} node={fault.node} "
                  f"{fault.note} {outcome}", flush=True)
        self.finish()
        return injected

    def finish(self):
        """Ends the last job: every agent exits 0 once the workers see DIR/stop."""
        self.pending.clear()
        open(os.path.join(self.job_dir, "stop"), "w").close()
        for node, agent in self.agents.items():
            if not agent.is_running():
                continue  # killed by a fault, not started again before the end
            try:
                agent.proc.wait(timeout=90)
            except Exception:
                self.job_notes.append(f"last job: node {node}'s agent did not end")
            if agent.proc.returncode not in (0, None) and node not in self.lost:
                self.jobs_lost += 1
                self.job_notes.append(f"last job: node {node}'s agent exited "
                                      f"{agent.proc.returncode}\n{agent.output()[-2000:]}")
        time.sleep(2)
        for node in self.nodes:
            for pid in cluster.namespace_pids(node):
                self.orphan_pids.add(pid)
                self.job_notes.append(f"left in node {node} after the job: {pid} "
                                      f"{cluster.cmdline(pid)[:120]}")
        self.kill_all()


def parse_args(argv):
    p = argparse.ArgumentParser(description="ddprun's fault soak (docs/soak.md)")
    p.add_argument("--bin", required=True, help="the build's bin/ folder (ddprun)")
    p.add_argument("--minutes", type=float, default=10)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--backend", choices=["c10d", "etcd"], default="c10d")
    p.add_argument("--recovery", choices=["restart", "inprocess"], default="restart")
    p.add_argument("--job", choices=sorted(jobs.JOBS), default="torch",
                   help="the workers: PyTorch DDP (soak_worker.py) or ddp-train")
    p.add_argument("--start_method", choices=["spawn", "forkserver"], default="spawn",
                   help="how ddprun starts Python workers: exec, or forked from a template that "
                        "imported torch once per node (ddp-train is native: always exec)")
    p.add_argument("--nodes", type=int, default=4)
    p.add_argument("--min_nodes", type=int, default=2)
    p.add_argument("--work", default=None, help="keep records here (default: a temporary dir)")
    args = p.parse_args(argv)
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 1 << 31)
    if args.nodes < args.min_nodes + 2:
        p.error(f"--nodes={args.nodes} must be at least --min_nodes + 2 (two nodes lost at once)")
    return args


def main(argv):
    args = parse_args(argv)
    keep = args.work is not None
    args.work = os.path.abspath(args.work or tempfile.mkdtemp(prefix="ddprun-soak."))
    os.makedirs(args.work, exist_ok=True)
    print(f"soak: seed {args.seed} backend {args.backend} recovery {args.recovery} "
          f"job {args.job} start_method {args.start_method} {args.minutes} min on {args.nodes} nodes; records in {args.work}", flush=True)
    soak = Soak(args)
    # One soak at a time on this machine: the rig is shared (the suite's short soak, soak.sh).
    lock = open(LOCK, "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    started = time.time()
    cluster.rig("down", check=False)
    cluster.rig("up", str(args.nodes))
    try:
        for node in soak.nodes:
            soak.tmpfs[node] = cluster.Tmpfs(os.path.join(args.work, f"logs_n{node}"))
        if args.backend == "etcd":
            soak.etcd = cluster.Etcd(args.work)
            soak.etcd.start_all()
        injected = soak.run()
    finally:
        soak.kill_all()
        if soak.etcd:
            soak.etcd.stop_all()
        for fs in soak.tmpfs.values():
            fs.unmount()
        cluster.rig("down", check=False)
    result = verdict.summarize(soak, injected, time.time() - started)
    result["job"] = args.job
    result["start_method"] = args.start_method
    verdict.print_table(result, soak.job_notes)
    print(json.dumps(result, sort_keys=True), flush=True)
    if not keep and result["ok"]:
        shutil.rmtree(args.work, ignore_errors=True)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
