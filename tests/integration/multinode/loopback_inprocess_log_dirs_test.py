"""--recovery=inprocess: a worker replaced without a spent restart keeps its logs apart from its
successor's. Three ddprun agents under c10d on loopback (--nnodes=2:3, --nproc_per_node=2,
--max_restarts=0: a spent restart would end the job, --log_dir and --redirects=3), real PyTorch
1.13 gloo DDP workers training through ddprun.elastic (inprocess_worker.py). Node 2's workers
hold between steps 6 and 7; the test then SIGKILLs node 2's agent and, at the same moment, node
0's local rank 1. That worker's failure follows from the node's loss, so node 0 spends no
restart and starts local rank 1 again alone at restart count 0: its new process writes under
attempt_0.1/1/, and the killed process's stderr.log under attempt_0/1/ still holds its own
lines. Node 0's local rank 0 and node 1's workers keep their PIDs, and the job trains on at
world 4 with no committed step done twice and equal parameter bits after each entry."""

import os
import signal

import ddptest
from ddptest import check
from inprocess_rig import (WORKER, LoopbackAgents, check_trained_once, events, held_pid,
                           loopback_torch_job_env, records, stderr_logs, wait_committed, wait_steps)
from netns_rig import check_no_processes

HOLD_STEP = 6


def agent_cmd(port, out_dir, node):
    hold = ["--hold", f"between:{HOLD_STEP}"] if node == 2 else []
    return [ddptest.bin_path("ddprun"), "--log_level=info", "--nnodes=2:3", "--nproc_per_node=2",
            "--max_restarts=0", "--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{port}",
            "--rdzv_id=logs",
            "--rdzv_conf=reform_timeout=90,last_call_timeout=1", "--recovery=inprocess",
            f"--event_log={os.path.join(out_dir, f'events_n{node}.jsonl')}",
            f"--log_dir={os.path.join(out_dir, f'logs_n{node}')}", "--redirects=3",
            "--python", ddptest.TORCH_PYTHON, WORKER, out_dir, "--node", str(node), *hold]


def main():
    tag, env = loopback_torch_job_env()
    out_dir = ddptest.temp_dir()
    port = ddptest.free_port()
    agents = LoopbackAgents(out_dir, env)
    try:
        # Node 0 hosts the job's store (node 2's loss must not take it along).
        agents.start(0, agent_cmd(port, out_dir, 0))
        hosts = lambda: "hosts the store" in open(os.path.join(out_dir, "agent_n0.log")).read()
        check(ddptest.wait_until(hosts, 60, 0.02), "node 0's agent did not host the store")
        for node in (1, 2):
            agents.start(node, agent_cmd(port, out_dir, node))
        check(ddptest.wait_until(lambda: held_pid(out_dir, 2), 120, 0.02),
              "node 2's workers never held between steps")
        wait_committed(out_dir, (0, 1), HOLD_STEP, "log dirs")
        first = {(r["node"], r["local_rank"]): r["pid"] for r in records(out_dir)
                 if r["kind"] == "entry"}
        victim = first[(0, 1)]
        os.killpg(agents[2].pid, signal.SIGKILL)
        os.kill(victim, signal.SIGKILL)
        agents[2].wait()

        fresh = lambda: [r for r in records(out_dir, 0) if r["pid"] not in first.values()]
        check(ddptest.wait_until(fresh, 120, 0.05), "node 0's local rank 1 was not started again")
        entry = fresh()[0]
        check(entry["local_rank"] == 1 and entry["world"] == 4 and entry["step"] == HOLD_STEP + 1,
              f"the new worker's first entry: {entry}")
        wait_steps(out_dir, 4, 3, entry["time"], "world 4 after the replacement")
        open(os.path.join(out_dir, "stop"), "w").close()
        agents.finish((0, 1), "log dirs")

        check_trained_once(out_dir, "log dirs")
        kept = {pid for key, pid in first.items() if key[0] != 2 and key != (0, 1)}
        ended = {r["pid"] for r in records(out_dir) if r["kind"] == "end"}
        check(ended == kept | {entry["pid"]}, f"the workers at the end {ended}, kept {kept}")
        log = events(out_dir, 0)
        names = [e["event"] for e in log]
        check("restart" not in names and names.count("workers_started") == 1,
              f"node 0 spent a restart or started its workers anew: {names}")
        replaced = [e for e in log if e["event"] == "worker_replaced"]
        check(len(replaced) == 1 and replaced[0]["restart_count"] == 0 and
              replaced[0]["pid"] == entry["pid"], f"node 0 worker_replaced events: {replaced}")

        logs = stderr_logs(out_dir, 0, 1)
        check(sorted(logs) == ["attempt_0", "attempt_0.1"],
              f"node 0 local rank 1's stderr logs: {sorted(logs)}")
        check(f"pid {victim} started" in logs["attempt_0"] and
              f"pid {entry['pid']} started" not in logs["attempt_0"],
              f"attempt_0/1/stderr.log: {logs['attempt_0'][-2000:]}")
        check(f"pid {entry['pid']} started" in logs["attempt_0.1"],
              f"attempt_0.1/1/stderr.log: {logs['attempt_0.1'][-2000:]}")

        check_no_processes(tag, "at the end")
        print("ok a worker killed with another node's loss was started again at restart count 0 "
              "under attempt_0.1/; the killed process's log under attempt_0/ kept its lines")
    finally:
        agents.kill_all()
        ddptest.remove_tree(out_dir)


if __name__ == "__main__":
    main()
