"""--recovery=inprocess with two workers per node: a worker that exits 3 is started again alone.
Two ddprun agents under c10d on loopback, --nproc_per_node=2 each, real PyTorch 1.13 gloo DDP
workers training through ddprun.elastic (inprocess_worker.py). Rank 1 exits 3 before its step 8:
its agent spends one restart and starts only that local rank again; its sibling on the same node
and the other node's two workers keep their PIDs and re-form (causes worker_failed on the failed
worker's node, peer_failed on the other). The new worker receives the state from a peer (it
enters train() past step 8), the job trains on at world 4, no committed step is done twice,
every rank holds the same parameter bits after each entry, both agents exit 0 and no process
is left behind. With the argument `forkserver` the workers, the new one too, are forked from
the forkserver's template (no --start_method: --recovery=inprocess's default); without it they
are exec'd (--start_method=spawn). With the argument `sigstop` rank 1 is
instead stopped with SIGSTOP after step 5, under --hang_timeout=2: its agent names the hang
(event hang), stops that process alone (worker_exited, stopped_by_agent) and starts it again
as above, while its sibling keeps its PID. With the argument `sigkill` rank 1 is SIGKILLed
after step 5 instead.

With every node alive, the failing node's failure verdict ends on the c10d roll call (every
lease holder answered), not on connection_grace + verdict_margin: its agent logs the answers
before it spends the restart.

Either way the logs stay apart (--log_dir, --redirects=3): the failed process's stderr.log
still holds its own lines after its replacement started, and the new process writes its own."""

import os
import signal
import sys

import ddptest
from ddptest import check
from inprocess_rig import (WORKER, LoopbackAgents, check_trained_once, events,
                           loopback_torch_job_env, records, stderr_logs, wait_steps)
from netns_rig import check_no_processes

NODES = (0, 1)
FORKSERVER = "forkserver" in sys.argv[1:]
SIGSTOP = "sigstop" in sys.argv[1:]
SIGKILL = "sigkill" in sys.argv[1:]


def agent_cmd(port, out_dir, node):
    log = os.path.join(out_dir, f"events_n{node}.jsonl")
    start = [] if FORKSERVER else ["--start_method=spawn"]
    fault = ["--hang_timeout=2"] if SIGSTOP else []
    worker_fault = [] if SIGSTOP or SIGKILL else ["--fail", "1:8"]
    # (--log_level=info: the checks read the verdict's info line.)
    return [ddptest.bin_path("ddprun"), "--log_level=info", *start, *fault, "--nnodes=2",
            "--nproc_per_node=2",
            "--max_restarts=1", "--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{port}",
            "--rdzv_id=replace", "--rdzv_conf=reform_timeout=90", "--recovery=inprocess",
            f"--event_log={log}", f"--log_dir={os.path.join(out_dir, f'logs_n{node}')}",
            "--redirects=3", "--python", ddptest.TORCH_PYTHON, WORKER, out_dir,
            "--node", str(node), *worker_fault]


def pids_by_rank_at_start(out_dir):
    """{rank: (node, pid)} of the first entry into train() of each rank."""
    first = {}
    for r in records(out_dir):
        if r["kind"] == "entry" and r["rank"] not in first:
            first[r["rank"]] = (r["node"], r["pid"])
    return first


def main():
    tag, env = loopback_torch_job_env()
    out_dir = ddptest.temp_dir()
    port = ddptest.free_port()
    agents = LoopbackAgents(out_dir, env)
    try:
        for node in NODES:
            agents.start(node, agent_cmd(port, out_dir, node))
        wait_steps(out_dir, 4, 5, 0.0, "world 4")
        started = pids_by_rank_at_start(out_dir)
        check(len(started) == 4, f"ranks at the start: {started}")
        failed_node, failed_pid = started[1]
        initial = {pid for _, pid in started.values()}
        if SIGSTOP:
            os.kill(failed_pid, signal.SIGSTOP)
        if SIGKILL:
            os.kill(failed_pid, signal.SIGKILL)

        fresh = lambda: [r for r in records(out_dir) if r["pid"] not in initial]
        check(ddptest.wait_until(fresh, 120, 0.05), "the failed worker was not started again")
        entry = fresh()[0]
        # It resumes at the newest commit: past step 8 (the exit), or the 5 before the signal.
        check(entry["kind"] == "entry" and entry["node"] == failed_node and
              entry["step"] >= (5 if SIGSTOP or SIGKILL else 8),
              f"the new worker did not receive the state: {entry}")
        wait_steps(out_dir, 4, 3, entry["time"], "world 4 after the replacement")

        open(os.path.join(out_dir, "stop"), "w").close()
        agents.finish(NODES, "worker fault")

        check_trained_once(out_dir, "worker exit")
        # Every worker but the failed one kept its process from the first step to the end.
        for pid in initial - {failed_pid}:
            kinds = [r["kind"] for r in records(out_dir) if r["pid"] == pid]
            check(kinds[-1] == "end" and kinds.count("entry") == 2,
                  f"worker pid {pid} did not re-form once and finish: entries "
                  f"{kinds.count('entry')}, last record {kinds[-1]}")
        final = {r["pid"] for r in records(out_dir) if r["kind"] == "end"}
        check(final == (initial - {failed_pid}) | {entry["pid"]},
              f"the workers at the end {final}, at the start {initial}, new {entry['pid']}")

        log = events(out_dir, failed_node)
        names = [e["event"] for e in log]
        check(names.count("workers_started") == 1 and "workers_stopped" not in names,
              f"node {failed_node} started or stopped its workers anew: {names}")
        restarts = [e for e in log if e["event"] == "restart"]
        check(len(restarts) == 1 and restarts[0]["restart_count"] == 1,
              f"node {failed_node} restart events: {restarts}")
        replaced = [e for e in log if e["event"] == "worker_replaced"]
        check(len(replaced) == 1 and replaced[0]["pid"] == entry["pid"],
              f"node {failed_node} worker_replaced events: {replaced}")
        reforms = [e["cause"] for e in log if e["event"] == "reform"]
        check(reforms == ["worker_failed"], f"node {failed_node} reform causes: {reforms}")
        hangs = [e for e in log if e["event"] == "hang"]
        check(len(hangs) == (1 if SIGSTOP else 0), f"node {failed_node} hang events: {hangs}")
        exits = [e for e in log if e["event"] == "worker_exited" and e["pid"] == failed_pid]
        check(len(exits) == 1 and exits[0]["stopped_by_agent"] == (1 if SIGSTOP else 0),
              f"node {failed_node}: the failed worker's exit: {exits}")
        check(names.index("worker_exited") < names.index("restart"),
              f"node {failed_node} spent the restart before its worker exited: {names}")
        # The verdict: the roll call, answered by every lease holder, before the restart.
        with open(os.path.join(out_dir, f"agent_n{failed_node}.log")) as f:
            agent_log = f.read()
        answered = agent_log.find("failure verdict round=0: all 1 lease holder(s) answered roll "
                                  "call 1, so none was lost")
        restarting = agent_log.find("restarting workers restart_count=1")
        check(0 <= answered < restarting,
              f"node {failed_node}'s verdict did not end on the roll call:\n{agent_log[-3000:]}")

        # The failed process's log and its replacement's are two files, each with its own lines
        # (inprocess_worker.py names its pid on stderr).
        logs = stderr_logs(out_dir, failed_node, 1)
        check(len(logs) == 2, f"node {failed_node} local rank 1's stderr logs: {list(logs)}")
        for pid in (failed_pid, entry["pid"]):
            holders = [path for path, text in logs.items() if f"pid {pid} started" in text]
            check(len(holders) == 1, f"the lines of pid {pid} are in {holders}: {logs}")

        other = 1 - failed_node
        log = events(out_dir, other)
        names = [e["event"] for e in log]
        check(names.count("workers_started") == 1 and "restart" not in names,
              f"node {other} restarted its workers: {names}")
        reforms = [e["cause"] for e in log if e["event"] == "reform"]
        check(reforms == ["peer_failed"], f"node {other} reform causes: {reforms}")

        check_no_processes(tag, "at the end")
        print("ok rank 1 exited 3: only it started again (one restart); its sibling and the "
              "other node's workers kept their PIDs, re-formed, and trained on at world 4")
    finally:
        agents.kill_all()
        ddptest.remove_tree(out_dir)


if __name__ == "__main__":
    main()
