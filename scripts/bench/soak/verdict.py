"""The soak's verdict: reads what the workers and agents recorded and turns it into the figures
and invariants of docs/soak.md (one JSON document, and the table printed before it)."""

import glob
import json
import os

# An agent whose descriptors or memory grew by more than this over the run leaks.
FD_GROWTH_LIMIT = 16
RSS_GROWTH_LIMIT_MB = 32
# An agent's first seconds (workers starting, buffers filling) are not its steady state.
AGENT_WARMUP_S = 10


def read_jsonl(path):
    records = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        records.append(json.loads(line))
                    except ValueError:
                        pass  # a line cut by the kill that ended its writer
    except FileNotFoundError:
        pass
    return records


def percentiles(values):
    values = sorted(v for v in values if v is not None)
    if not values:
        return {"p50": None, "p99": None, "max": None, "n": 0}
    rank = max(0, min(len(values) - 1, int(round(0.99 * len(values) + 0.5)) - 1))
    return {"p50": round(values[len(values) // 2], 3), "p99": round(values[rank], 3),
            "max": round(values[-1], 3), "n": len(values)}


def progress(name, records, recovery):
    """Steps redone over the job's re-entries, and re-entries that went back further than the
    mode allows (restart: the last checkpoint; inprocess: the last commit, less the step in
    flight: a rank may complete a step its peers never finished)."""
    steps, checkpoints, commits = records.steps(), records.checkpoints(), records.commits()
    starts = sorted(records.starts(), key=lambda s: s["t"])
    redone, went_back = 0, []
    for start in starts[1:]:
        before = [s["step"] for s in steps if s["t"] < start["t"]]
        done = max(before, default=0)
        redone += max(0, done - start["step"])
        if recovery == "restart":
            floor = max((c["step"] for c in checkpoints if c["t"] < start["t"]), default=0)
        else:
            committed = [c["step"] for c in commits if c["t"] < start["t"]]
            floor = max(committed, default=done) - 1
        if start["step"] < floor:
            went_back.append(f"{name}: resumed at step {start['step']}, below {floor}")
    return redone, went_back


class EventLogs:
    """The agents' event logs of the run (events_j<job>_n<node>_a<agent>.jsonl), each read once."""

    def __init__(self, work):
        self.work = work
        self.read = {}

    def first(self, fault, node, event, fields):
        """When the first `event` with `fields` after the fault was recorded (any node when `node`
        is 0), or None."""
        pattern = f"events_j{fault.job}_n{node if node else '*'}_a*.jsonl"
        times = []
        for path in glob.glob(os.path.join(self.work, pattern)):
            if path not in self.read:
                self.read[path] = read_jsonl(path)
            times += [e["wall_time"] for e in self.read[path]
                      if e.get("event") == event and e.get("wall_time", 0) >= fault.t - 0.5 and
                      all(e.get(k) == v for k, v in fields.items())]
        return min(times, default=None)


def missing_events(logs, injected):
    missing = []
    for fault in injected:
        for node, event, fields in fault.expect:
            if logs.first(fault, node, event, fields) is None:
                missing.append(f"{fault.kind} at {fault.t:.2f} on node {fault.node}: no "
                               f"{event} {fields} in node {node or 'any'}'s event log")
    return missing


def after_detection(logs, injected):
    """By kind, the seconds from the agents' verdict on each fault to training again: the last of
    its expected events (during_recovery: the node loss after the worker's exit), each at its
    first record, to the recovery's end. Faults no agent judges (nothing expected) have none."""
    times = {}
    for fault in injected:
        if not fault.expect or fault.recovery_s is None:
            continue
        seen = [logs.first(fault, node, event, fields) for node, event, fields in fault.expect]
        if None in seen:
            continue
        fault.after_detection_s = max(0.0, fault.t + fault.recovery_s - max(seen))
        times.setdefault(fault.kind, []).append(fault.after_detection_s)
    return {kind: percentiles(values) for kind, values in sorted(times.items())}


def roles(event_log):
    """(t, role) for each round the agent entered: its role is whether it was group rank 0 (whose
    agent hosts the round's workers' store and, with etcd, the members' links) and the world size
    (the connections it holds for them)."""
    return [(e["wall_time"], (e.get("group_rank") == 0, e.get("world_size")))
            for e in read_jsonl(event_log) if e.get("event") == "rendezvous"]


def steady_by_role(agent):
    """The agent's samples after its warm-up, grouped by its role when each was taken."""
    entered = roles(agent.event_log) if getattr(agent, "event_log", None) else []
    groups = {}
    for sample in agent.samples:
        if sample[0] - agent.started < AGENT_WARMUP_S:
            continue
        role = next((r for t, r in reversed(entered) if t <= sample[0]), None)
        groups.setdefault(role, []).append(sample)
    return groups.values()


def agent_growth(agents, notes):
    """The largest RSS and descriptor growth of any agent after its warm-up; a note naming the
    descriptors the worst one gained."""
    rss_mb, fds, worst = 0.0, 0, None
    for agent in agents:
        # An agent's descriptors and memory follow its role (hosting the round's workers' store,
        # at some world size, holds its workers' connections) and its workers' restarts, so
        # samples are compared with samples of the same role only. Within a role, the lower
        # envelope: the least of the first and of the last quarter of the samples. A leak
        # raises the floor.
        for steady in steady_by_role(agent):
            if len(steady) < 2:
                continue
            quarter = max(1, len(steady) // 4)
            first, last = steady[:quarter], steady[-quarter:]
            rss_mb = max(rss_mb, (min(s[1] for s in last) - min(s[1] for s in first)) / 1024.0)
            grown = min(s[2] for s in last) - min(s[2] for s in first)
            if grown > fds:
                fds, worst = grown, agent
    if worst and worst.fds_first is not None:
        gained = list(worst.fds_last)
        for target in worst.fds_first:
            if target in gained:
                gained.remove(target)
        notes.append(f"agent on node {worst.node} (#{worst.index}) gained {fds} descriptors "
                     f"(within one role): first and last sample differ by {sorted(gained)[:20]}")
    return round(rss_mb, 2), fds


def summarize(soak, injected, elapsed_s):
    faults = {}
    for fault in injected:
        faults[fault.kind] = faults.get(fault.kind, 0) + 1
    redone, went_back, bad_checks, checks = 0, [], [], 0
    for job_dir in soak.jobs:
        records = soak.job.records(job_dir)
        r, back = progress(os.path.basename(job_dir), records, soak.args.recovery)
        redone += r
        went_back += back
        bad_checks += [c for c in records.checks() if c["lo"] != c["hi"]]
        checks += len(records.checks())
    logs = EventLogs(soak.work)
    missing = missing_events(logs, injected)
    rss_mb, fds = agent_growth(soak.all_agents, soak.job_notes)
    result = {
        "seed": soak.args.seed, "backend": soak.backend, "recovery": soak.args.recovery,
        "minutes": round(elapsed_s / 60, 2), "faults": faults,
        "jobs": len(soak.jobs), "jobs_lost": soak.jobs_lost,
        "recovery_s": {kind: percentiles(times) for kind, times in sorted(soak.recovery.items())},
        "after_detection_s": after_detection(logs, injected),
        "detection_window_s": soak.detection_windows(),
        "job_restart_s": percentiles(soak.job_restarts),
        "steps_redone": redone, "progress_went_back": len(went_back),
        "checksum_checks": checks, "checksum_mismatches": len(bad_checks),
        "orphans": len(soak.orphan_pids), "agent_rss_growth_mb": rss_mb, "agent_fd_growth": fds,
        "events_missing": len(missing),
    }
    result["ok"] = (soak.jobs_lost == 0 and not went_back and not bad_checks and
                    not soak.orphan_pids and not missing and fds <= FD_GROWTH_LIMIT and
                    rss_mb <= RSS_GROWTH_LIMIT_MB and checks > 0)
    soak.job_notes += went_back + missing + [f"checksum differs: {c}" for c in bad_checks[:5]]
    return result


def print_table(r, notes):
    print(f"\nsoak seed {r['seed']}: {r['backend']}, --recovery={r['recovery']}, "
          f"{r['minutes']} min, {sum(r['faults'].values())} faults, {r['jobs']} job(s)")
    # recovery: from the fault; after verdict: from the agents' verdict (the event log's hang,
    # node_lost or worker_exited); window: the configured detection window the kind waits out.
    # The goal is judged on the after-verdict figure for the kinds with a window, on the
    # recovery for the others (docs/soak.md).
    print(f"{'fault':18s} {'count':>5s} {'p50 s':>7s} {'p99 s':>7s} {'max s':>7s}   "
          f"{'after verdict p50/p99/max s':>27s} {'window s':>8s}")
    fmt = lambda v: f"{v:7.2f}" if v is not None else "      -"  # noqa: E731
    windows = r.get("detection_window_s", {})
    for kind in sorted(set(r["faults"]) | set(r["recovery_s"])):
        p = r["recovery_s"].get(kind, {})
        a = r["after_detection_s"].get(kind, {})
        after = " ".join(fmt(a.get(k)) for k in ("p50", "p99", "max")) if a else ""
        window = f"{windows[kind]:8.1f}" if kind in windows else ""
        print(f"{kind:18s} {r['faults'].get(kind, 0):5d} {fmt(p.get('p50'))} {fmt(p.get('p99'))} "
              f"{fmt(p.get('max'))}   {after:>27s} {window:>8s}".rstrip())
    j = r["job_restart_s"]
    if j["n"]:
        print(f"{'job_restart':18s} {j['n']:5d} {fmt(j['p50'])} {fmt(j['p99'])} {fmt(j['max'])}"
              f"   (c10d store_host_kill: the job ends; to the next job's first step)")
    rows = [("jobs lost (goal 0)", r["jobs_lost"]), ("steps redone", r["steps_redone"]),
            ("progress went back (goal 0)", r["progress_went_back"]),
            ("checksum checks / mismatches (goal 0)",
             f"{r['checksum_checks']} / {r['checksum_mismatches']}"),
            ("orphans (goal 0)", r["orphans"]),
            ("agent RSS growth MB (goal flat)", r["agent_rss_growth_mb"]),
            ("agent fd growth (goal flat)", r["agent_fd_growth"]),
            ("events missing (goal 0)", r["events_missing"])]
    for name, value in rows:
        print(f"{name:40s} {value}")
    for note in notes:
        print(f"note: {note}")
    print("verdict:", "ok" if r["ok"] else "FAILED", flush=True)
