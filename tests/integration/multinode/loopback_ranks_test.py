"""4 agents x 2 workers on loopback, static and c10d (IPv4 and IPv6 endpoints): ranks 0..7
exactly once, WORLD_SIZE 8, one GROUP_RANK per agent, every agent exits 0 and leaves no process
behind."""

import glob
import json
import os
import sys
import uuid

import ddptest
from ddptest import check, fail
from store.store_servers import ddp_store

NODES, NPROC = 4, 2
WORKER = os.path.join(ddptest.SOURCE_DIR, "tests/integration/workers/env_dump.py")


def launch(backend, port, out_dir, tag):
    procs = []
    for node in range(NODES):
        cmd = [ddptest.bin_path("ddprun"), f"--nnodes={NODES}", f"--nproc_per_node={NPROC}",
               "--python", sys.executable, "--log_level=info"]  # the checks read info lines
        if backend == "static":
            cmd += [f"--node_rank={node}", "--master_addr=127.0.0.1", f"--master_port={port}"]
        else:
            host = "[::1]" if backend == "c10d-ipv6" else "127.0.0.1"
            cmd += ["--rdzv_backend=c10d", f"--rdzv_endpoint={host}:{port}",
                    "--rdzv_id=loopback", "--rdzv_conf=join_timeout=30"]
        cmd += [WORKER, out_dir]
        procs.append(ddptest.spawn(cmd, env={"DDP_TEST_TAG": tag}, stdout=ddptest.subprocess.PIPE,
                                   stderr=ddptest.subprocess.PIPE, text=True))
    return procs


def check_run(backend):
    out_dir = ddptest.temp_dir()
    tag = str(uuid.uuid4())
    procs = launch(backend, ddptest.free_port(), out_dir, tag)
    logs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=60)
            logs.append(err)
            check(p.returncode == 0, f"{backend}: agent exited {p.returncode}\n{err}")
        records = [json.load(open(f)) for f in glob.glob(os.path.join(out_dir, "env_rank*.json"))]
        ranks = sorted(int(r["env"]["RANK"]) for r in records)
        check(ranks == list(range(NODES * NPROC)), f"{backend}: ranks {ranks}")
        check({r["env"]["WORLD_SIZE"] for r in records} == {str(NODES * NPROC)},
              f"{backend}: WORLD_SIZE values {[r['env']['WORLD_SIZE'] for r in records]}")
        groups = sorted(int(r["env"]["GROUP_RANK"]) for r in records)
        check(groups == sorted(list(range(NODES)) * NPROC), f"{backend}: GROUP_RANKs {groups}")
        for r in records:
            env = r["env"]
            check(int(env["RANK"]) == int(env["GROUP_RANK"]) * NPROC + int(env["LOCAL_RANK"]),
                  f"{backend}: RANK/GROUP_RANK/LOCAL_RANK disagree: {env['RANK']}")
        masters = {(r["env"]["MASTER_ADDR"], r["env"]["MASTER_PORT"]) for r in records}
        check(len(masters) == 1, f"{backend}: workers disagree on the store: {masters}")
        if backend.startswith("c10d"):
            hosts = [log for log in logs if "hosts the store" in log]
            check(len(hosts) == 1, f"c10d: {len(hosts)} agents say they host the store")
            check(all("round closed" in log for log in logs), "c10d: an agent logged no round")
        check(ddptest.wait_until(lambda: not ddptest.processes_with_env(f"DDP_TEST_TAG={tag}"), 5),
              f"{backend}: processes left behind")
    except ddptest.subprocess.TimeoutExpired:
        fail(f"{backend}: agents did not finish in 60 s\n" + "\n".join(logs))
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, 9)
                p.wait()
        ddptest.remove_tree(out_dir)


def check_two_jobs_one_endpoint():
    """Two 2-node c10d jobs meet at one endpoint without --rdzv_id: each derives its own run id
    from its command line, so neither takes the other's nodes. The store at the endpoint is a
    `ddp-store serve` that outlives both jobs: a store hosted by an agent lives only as long as
    that agent's job, so the other job would lose it when the host's job ended first (in a CI
    run under load it did: "store ... unreachable (its host agent exited ...)")."""
    store = ddp_store()
    port = store.port
    tag = str(uuid.uuid4())
    dirs = [ddptest.temp_dir(), ddptest.temp_dir()]
    procs = []
    try:
        for node in range(2):
            for out_dir in dirs:  # interleaved: A0 B0 A1 B1
                cmd = [ddptest.bin_path("ddprun"), "--nnodes=2", f"--nproc_per_node={NPROC}",
                       "--python", sys.executable, "--rdzv_backend=c10d",
                       f"--rdzv_endpoint=127.0.0.1:{port}", "--rdzv_conf=join_timeout=30",
                       WORKER, out_dir]
                procs.append(ddptest.spawn(cmd, env={"DDP_TEST_TAG": tag},
                                           stdout=ddptest.subprocess.PIPE,
                                           stderr=ddptest.subprocess.PIPE, text=True))
        for p in procs:
            out, err = p.communicate(timeout=60)
            check(p.returncode == 0, f"two jobs: agent exited {p.returncode}\n{err}")
        run_ids = []
        for out_dir in dirs:
            records = [json.load(open(f)) for f in glob.glob(os.path.join(out_dir, "env_rank*.json"))]
            ranks = sorted(int(r["env"]["RANK"]) for r in records)
            check(ranks == list(range(2 * NPROC)), f"two jobs: one job's ranks {ranks}")
            ids = {r["env"]["TORCHELASTIC_RUN_ID"] for r in records}
            check(len(ids) == 1 and next(iter(ids)).startswith("job-"), f"two jobs: run ids {ids}")
            run_ids.append(ids.pop())
        check(run_ids[0] != run_ids[1], f"two jobs share the run id {run_ids[0]}")
    except ddptest.subprocess.TimeoutExpired:
        fail("two jobs: agents did not finish in 60 s")
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, 9)
                p.wait()
        for out_dir in dirs:
            ddptest.remove_tree(out_dir)
        store.stop()


for backend in ("static", "c10d", "c10d-ipv6"):
    check_run(backend)
    print(f"ok {backend}: ranks 0..{NODES * NPROC - 1} once, WORLD_SIZE {NODES * NPROC}")
check_two_jobs_one_endpoint()
print("ok two c10d jobs on one endpoint without --rdzv_id: separate run ids, ranks 0..3 each")
