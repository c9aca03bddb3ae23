"""Static rendezvous across two agents on loopback (--nnodes=2, node ranks 0 and 1, 2 workers
each): ranks 0..3 once, WORLD_SIZE 4, node 0's store; a worker failure on node 1 restarts the
workers on node 0 too; when the restarts are spent, node 1 reports its worker and node 0 ends
with a clear error; a node that never comes is named in the error."""
import os
import signal
import subprocess

import agenttest
import ddptest


def start_agent(node_rank, port, out, extra, tmp):
    stderr = open(os.path.join(tmp, f"agent{node_rank}.err"), "w")
    return ddptest.spawn([agenttest.ddprun(), "--python", agenttest.PYTHON, "--nnodes=2",
                          f"--node_rank={node_rank}", "--nproc_per_node=2",
                          "--master_addr=127.0.0.1", f"--master_port={port}"] + extra +
                         [agenttest.worker("fail_once.py"), out, "--rank", "3", "--code", "5"],
                         stdout=subprocess.DEVNULL, stderr=stderr,
                         env={"DDP_TEST_HEALTHY_SECONDS": "1"})


def wait_all(procs, timeout):
    try:
        return [p.wait(timeout=timeout) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)


def two_nodes_restart_together(tmp):
    out = os.path.join(tmp, "two"); os.mkdir(out)
    port = ddptest.free_port()
    procs = [start_agent(r, port, out, ["--max_restarts=1"], tmp) for r in (1, 0)]
    codes = wait_all(procs, 60)
    errs = "".join(open(os.path.join(tmp, f"agent{r}.err")).read() for r in (0, 1))
    ddptest.check(codes == [0, 0], f"exit codes {codes}\n{errs}")
    for attempt in (0, 1):
        records = agenttest.env_dumps(out, attempt)
        ddptest.check(sorted(records) == [0, 1, 2, 3], f"attempt {attempt} ranks {sorted(records)}\n{errs}")
        for rank, record in records.items():
            env = record["env"]
            ddptest.check(env["WORLD_SIZE"] == "4" and env["GROUP_RANK"] == str(rank // 2) and
                          env["LOCAL_RANK"] == str(rank % 2) and env["GROUP_WORLD_SIZE"] == "2" and
                          env["MASTER_PORT"] == str(port) and
                          env["TORCHELASTIC_RESTART_COUNT"] == str(attempt),
                          f"attempt {attempt} rank {rank}: {env}")


def restarts_spent_on_node1(tmp):
    out = os.path.join(tmp, "spent"); os.mkdir(out)
    port = ddptest.free_port()
    procs = [start_agent(r, port, out, ["--max_restarts=0"], tmp) for r in (0, 1)]
    codes = wait_all(procs, 60)
    err0 = open(os.path.join(tmp, "agent0.err")).read()
    err1 = open(os.path.join(tmp, "agent1.err")).read()
    ddptest.check(codes == [1, 5], f"exit codes {codes}, expected [1, 5]\n{err0}\n{err1}")
    ddptest.check("rank      : 3 (local_rank: 1)" in err1, f"node 1 report:\n{err1}")
    ddptest.check("the job ended on another node" in err0, f"node 0 message:\n{err0}")


def missing_node_named(tmp):
    out = os.path.join(tmp, "missing"); os.mkdir(out)
    port = ddptest.free_port()
    proc = start_agent(0, port, out, ["--rdzv_conf=timeout=2"], tmp)
    code = wait_all([proc], 30)[0]
    err = open(os.path.join(tmp, "agent0.err")).read()
    ddptest.check(code == 1, f"missing node: exit code {code}\n{err}")
    ddptest.check("node(s) 1 of --nnodes=2 did not join" in err, f"not named:\n{err}")


def main():
    tmp = ddptest.temp_dir()
    try:
        two_nodes_restart_together(tmp)
        restarts_spent_on_node1(tmp)
        missing_node_named(tmp)
    finally:
        ddptest.remove_tree(tmp)


if __name__ == "__main__":
    main()
    print("ok")
