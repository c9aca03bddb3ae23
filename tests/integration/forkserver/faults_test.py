"""--start_method=forkserver supervision with real /usr/bin/python3 + PyTorch workers:
- the DDP script (gloo, 2 workers) gives the same results as under exec;
- a worker that fails is restarted from the same template (one 'forkserver ready'), new pids;
- a worker killed by a signal gives 128+N;
- SIGQUIT writes both workers' Python stacks and the job goes on; SIGTERM reaches the workers;
- SIGKILL of ddprun leaves no worker, grandchild or template behind;
- a preload module that fails to import: one line naming it and exit 1, or with
  --preload_fallback a warning and exec'd workers;
- the template imports during the first rendezvous: the round closes and the store ddprun hosts
  answers while an import is held; SIGTERM then ends ddprun (143), SIGKILL leaves nothing; a
  failed import is reported only when the first launch needs the template."""
import glob
import json
import os
import signal
import subprocess
import time
import uuid

import ddptest
import fstest


def check_ddp(tmp):
    out = os.path.join(tmp, "ddp")
    os.mkdir(out)
    result, _ = fstest.launch(fstest.FORKSERVER + [
        "--nproc_per_node=2", fstest.worker("torch_ddp_train.py"), out, "--steps", "5"],
        timeout=120)
    fstest.expect_exit(result, 0, "torch DDP under the forkserver")
    results = [fstest.read_json(os.path.join(out, f"result_rank{r}.json")) for r in (0, 1)]
    for r, record in enumerate(results):
        ddptest.check(record["world_size"] == 2 and record["rank"] == r, f"rank {r}: {record}")
        ddptest.check(record["allreduce"] == 1, f"all_reduce: {record}")
        ddptest.check(record["params"] == results[0]["params"], "parameters differ across ranks")
    print("DDP script: all_reduce, identical parameters on both ranks, checkpoint")


def check_restart_and_signal(tmp):
    out = os.path.join(tmp, "restart")
    os.mkdir(out)
    result, _ = fstest.launch(fstest.FORKSERVER + [
        "--nproc_per_node=2", "--max_restarts=1", "--log_level=debug",
        fstest.worker("fail_once.py"), out, "--rank", "1", "--code", "3", "--lines", "2"])
    fstest.expect_exit(result, 0, "a restart under the forkserver")
    ddptest.check(len(fstest.ready_lines(result.stderr)) == 1,
                  f"the template must serve both attempts:\n{result.stderr}")
    # OMP_NUM_THREADS=1 with two workers: the template has one thread, and forks each worker
    # straight as ddprun's child (no middle process).
    forked = [line for line in result.stderr.splitlines() if "workers from the forkserver" in line]
    ddptest.check(len(forked) == 2 and all("through_middle=false" in line for line in forked),
                  f"how the workers were forked:\n{forked}")
    first, second = fstest.env_dumps(out, 0), fstest.env_dumps(out, 1)
    ddptest.check(sorted(first) == [0, 1] and sorted(second) == [0, 1], "missing attempts")
    ddptest.check(not {r["pid"] for r in first.values()} & {r["pid"] for r in second.values()},
                  "the restarted workers reuse pids")
    print("restart: attempt 1 forked from the same template after rank 1 exited 3")

    out = os.path.join(tmp, "signal")
    os.mkdir(out)
    result, _ = fstest.launch(fstest.FORKSERVER + [
        "--nproc_per_node=2", fstest.worker("fail_once.py"), out, "--rank", "1",
        "--signal", str(int(signal.SIGSEGV)), "--lines", "1"])
    fstest.expect_exit(result, 128 + signal.SIGSEGV, "a worker killed by SIGSEGV")
    ddptest.check("SIGSEGV" in result.stderr, f"the report names no signal:\n{result.stderr}")
    print("a worker's SIGSEGV: ddprun exits 139 and names the signal")


def check_stacks_and_term(tmp):
    out, logs = os.path.join(tmp, "wait"), os.path.join(tmp, "wait_logs")
    os.mkdir(out)
    proc = ddptest.spawn(fstest.ddprun_cmd(fstest.FORKSERVER + [
        "--nproc_per_node=2", "--log_dir", logs, fstest.PROBE, out, "--mode", "wait"]),
        stdout=open(os.path.join(tmp, "wait.out"), "w"),
        stderr=open(os.path.join(tmp, "wait.err"), "w"))
    try:
        ready = ddptest.wait_until(lambda: len(glob.glob(os.path.join(out, "ready_rank*"))) == 2,
                                   60)
        ddptest.check(ready, f"workers not ready:\n{open(os.path.join(tmp, 'wait.err')).read()}")
        os.kill(proc.pid, signal.SIGQUIT)
        ddptest.wait_until(lambda: glob.glob(os.path.join(logs, "*", "stacks_0.txt")), 30)
        reports = glob.glob(os.path.join(logs, "*", "stacks_0.txt"))
        ddptest.check(reports, "SIGQUIT wrote no stacks report")
        report = open(reports[0]).read()
        for needle in ("2 rank(s) on 1 node(s)", "(python)", "in wait", "forkserver_probe.py"):
            ddptest.check(needle in report, f"stacks report lacks {needle!r}:\n{report}")
        ddptest.check(proc.poll() is None, "SIGQUIT ended the job")
        os.kill(proc.pid, signal.SIGTERM)
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    output = open(os.path.join(tmp, "wait.out")).read()
    ddptest.check(rc == 128 + signal.SIGTERM, f"SIGTERM: ddprun exit {rc}")
    for rank in (0, 1):
        ddptest.check(f"rank {rank} got signal 15" in output, f"rank {rank}'s handler:\n{output}")
    print("SIGQUIT: both workers' Python stacks, job kept running; SIGTERM: handlers ran, 143")


def check_sigkill_leaves_nothing(tmp):
    out = os.path.join(tmp, "orphans")
    os.mkdir(out)
    tag = f"ddptest-{uuid.uuid4()}"
    proc = ddptest.spawn(fstest.ddprun_cmd(fstest.FORKSERVER + [
        "--nproc_per_node=2", fstest.worker("spawn_grandchild.py"), out]),
        env={"DDP_TEST_TAG": tag}, stdout=open(os.devnull, "w"), stderr=open(os.devnull, "w"))
    try:
        started = ddptest.wait_until(lambda: len(glob.glob(os.path.join(out, "pids_rank*"))) == 2,
                                     60)
        ddptest.check(started, "the workers did not start their grandchildren")
        marker = f"DDP_TEST_TAG={tag}"
        # ddprun, the guard, the template, 2 workers and 2 grandchildren carry the tag.
        ddptest.check(len(ddptest.processes_with_env(marker)) >= 6,
                      f"expected the template, workers and grandchildren: "
                      f"{ddptest.processes_with_env(marker)}")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        gone = ddptest.wait_until(lambda: not ddptest.processes_with_env(marker), 5)
        ddptest.check(gone, f"left behind: {ddptest.processes_with_env(marker)}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    print("SIGKILL of ddprun: no template, worker or grandchild left")


def check_failing_import(tmp):
    out = os.path.join(tmp, "import")
    os.mkdir(out)
    args = fstest.FORKSERVER + ["--preload=json,ddp_no_such_module", "--nproc_per_node=1",
                                fstest.PROBE, out]
    result, _ = fstest.launch(args)
    fstest.expect_exit(result, 1, "a preload module that does not import")
    lines = [line for line in result.stderr.splitlines() if "ddp_no_such_module" in line]
    expected = ("forkserver: cannot import module 'ddp_no_such_module': ModuleNotFoundError: "
                "No module named 'ddp_no_such_module'")
    ddptest.check(len(lines) == 1 and expected in lines[0], f"the error:\n{result.stderr}")
    ddptest.check(not fstest.probes(out), "a worker ran although the template failed")

    result, _ = fstest.launch(["--preload_fallback"] + args)
    fstest.expect_exit(result, 0, "--preload_fallback")
    ddptest.check("--preload_fallback" in result.stderr and expected in result.stderr,
                  f"no fallback warning:\n{result.stderr}")
    probes = fstest.probes(out)
    ddptest.check(sorted(probes) == [0] and not probes[0]["torch_at_first_line"],
                  f"the fallback must exec the worker: {probes}")
    print("failing import: one line naming the module, exit 1; --preload_fallback execs")

# A preload module that holds its import until the test creates DIR/release: it writes its pid
# (the template's) to DIR/importing first, and DIR/imported once let go.
GATED_MODULE = """import os, time
d = os.environ["DDP_GATE_DIR"]
open(os.path.join(d, "importing.tmp"), "w").write(str(os.getpid()))
os.replace(os.path.join(d, "importing.tmp"), os.path.join(d, "importing"))
while not os.path.exists(os.path.join(d, "release")):
    time.sleep(0.02)
open(os.path.join(d, "imported"), "w").write("")
"""


def gated(tmp, name):
    """(directory, env) of a gated preload module `ddp_gated_import` under tmp/name."""
    gate = os.path.join(tmp, name)
    os.makedirs(os.path.join(gate, "modules"))
    with open(os.path.join(gate, "modules", "ddp_gated_import.py"), "w") as f:
        f.write(GATED_MODULE)
    path = os.path.join(gate, "modules") + (
        ":" + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")
    return gate, {"DDP_GATE_DIR": gate, "PYTHONPATH": path}


def template_pid(gate):
    return int(open(os.path.join(gate, "importing")).read())


def is_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def events_of(path, kind):
    if not os.path.exists(path):
        return []
    events = []
    for line in open(path):
        try:
            event = json.loads(line)
        except ValueError:
            continue  # the line being written
        if event.get("event") == kind:
            events.append(event)
    return events


def check_import_overlaps_rendezvous(tmp):
    gate, env = gated(tmp, "overlap")
    out, events = os.path.join(gate, "out"), os.path.join(gate, "events.jsonl")
    os.mkdir(out)
    port = ddptest.free_port()
    err_path = os.path.join(gate, "ddprun.err")
    proc = ddptest.spawn(fstest.ddprun_cmd(fstest.FORKSERVER + [
        "--preload=torch,ddp_gated_import", "--rdzv_backend=c10d",
        f"--rdzv_endpoint=127.0.0.1:{port}", "--nnodes=1", "--log_level=debug", "--event_log",
        events, "--nproc_per_node=1", fstest.PROBE, out]), env=env,
        stdout=open(os.devnull, "w"), stderr=open(err_path, "w"))
    try:
        importing = ddptest.wait_until(lambda: os.path.exists(os.path.join(gate, "importing")), 60)
        ddptest.check(importing, f"the template never imported:\n{open(err_path).read()}")
        closed = ddptest.wait_until(lambda: events_of(events, "rendezvous"), 30)
        ddptest.check(closed, f"the round did not close during the import:\n"
                              f"{open(err_path).read()}")
        store = ddptest.bin_path("ddp-store")
        addr = f"127.0.0.1:{port}"
        ddptest.run([store, "set", "--addr", addr, "ddp_test/during_import", "held"], check_rc=0,
                    timeout=10)
        got = ddptest.run([store, "get", "--addr", addr, "ddp_test/during_import"], check_rc=0,
                          timeout=10)
        ddptest.check("held" in got.stdout, f"the hosted store's answer: {got.stdout!r}")
        ddptest.check(not os.path.exists(os.path.join(gate, "imported")) and
                      not fstest.probes(out), "the import was not held")
        open(os.path.join(gate, "release"), "w").close()
        rc = proc.wait(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    err = open(err_path).read()
    ddptest.check(rc == 0, f"ddprun exit {rc}:\n{err}")
    probes = fstest.probes(out)
    ddptest.check(sorted(probes) == [0] and probes[0]["torch_at_first_line"],
                  f"the worker was not forked from the template: {probes}")
    # One worker: no OMP_NUM_THREADS, so a BLAS pool may run in the template; with one the
    # worker comes through a middle process (a fork that runs the pthread_atfork handlers).
    threads = int(fstest.ready_lines(err)[0].split("threads=")[1].split()[0])
    forked = [line for line in err.splitlines() if "workers from the forkserver" in line]
    ddptest.check(len(forked) == 1 and f"through_middle={str(threads > 1).lower()}" in forked[0],
                  f"threads={threads}, how the worker was forked: {forked}")
    print(f"import held: the round closed and the hosted store answered; then forked "
          f"(template threads={threads}), exit 0")


def check_signals_during_import(tmp):
    for kill in (signal.SIGTERM, signal.SIGKILL):
        gate, env = gated(tmp, f"signal{int(kill)}")
        tag = f"ddptest-{uuid.uuid4()}"
        env["DDP_TEST_TAG"] = tag
        err_path = os.path.join(gate, "ddprun.err")
        proc = ddptest.spawn(fstest.ddprun_cmd(fstest.FORKSERVER + [
            "--preload=torch,ddp_gated_import", "--nproc_per_node=2", fstest.PROBE, gate]),
            env=env, stdout=open(os.devnull, "w"), stderr=open(err_path, "w"))
        try:
            importing = ddptest.wait_until(
                lambda: os.path.exists(os.path.join(gate, "importing")), 60)
            ddptest.check(importing, f"the template never imported:\n{open(err_path).read()}")
            template = template_pid(gate)
            os.kill(proc.pid, kill)
            rc = proc.wait(timeout=30)
            marker = f"DDP_TEST_TAG={tag}"
            gone = ddptest.wait_until(lambda: not ddptest.processes_with_env(marker), 5)
            ddptest.check(gone, f"{kill.name} during the import left behind: "
                                f"{ddptest.processes_with_env(marker)}")
            ddptest.check(ddptest.wait_until(lambda: not is_alive(template), 5),
                          f"the template {template} outlived ddprun")
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        ddptest.check(rc == 128 + kill if kill == signal.SIGTERM else rc == -kill,
                      f"{kill.name} during the import: ddprun exit {rc}\n{open(err_path).read()}")
        ddptest.check(not os.path.exists(os.path.join(gate, "imported")),
                      "the import finished although ddprun was gone")
    print("SIGTERM during the import: 143 at once; SIGKILL: no template or guard left")


def check_failed_import_waits_for_launch(tmp):
    """Two nodes whose template fails at once: the first agent keeps waiting for the second node,
    and reports the import only when its first launch needs the template."""
    gate, env = gated(tmp, "late")
    open(os.path.join(gate, "release"), "w").close()  # the gated module imports at once
    port = ddptest.free_port()
    node = fstest.ddprun_cmd(fstest.FORKSERVER + [
        "--preload=ddp_gated_import,ddp_no_such_module", "--rdzv_backend=c10d",
        f"--rdzv_endpoint=127.0.0.1:{port}", "--nnodes=2", "--nproc_per_node=1",
        fstest.PROBE, gate])
    first = ddptest.spawn(node, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
    second = None
    try:
        ddptest.check(ddptest.wait_until(lambda: os.path.exists(os.path.join(gate, "importing")),
                                         60), "the first node's template never started")
        template = template_pid(gate)
        ddptest.check(ddptest.wait_until(lambda: not is_alive(template), 30),
                      "the failing template did not exit")
        ddptest.check(first.poll() is None,
                      "ddprun failed before its first launch needed the template")
        second = ddptest.spawn(node, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
        results = [p.communicate(timeout=90) + (p.returncode,) for p in (first, second)]
    finally:
        for p in (first, second):
            if p is not None and p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    expected = ("forkserver: cannot import module 'ddp_no_such_module': ModuleNotFoundError: "
                "No module named 'ddp_no_such_module'")
    # The first node hosts the store: the second reports either its own import or the store's
    # end, whichever comes first.
    _, err, rc = results[0]
    lines = [line for line in err.splitlines() if "ddp_no_such_module" in line]
    ddptest.check(rc == 1 and len(lines) == 1 and expected in lines[0],
                  f"the first node: exit {rc}, the error:\n{err}")
    ddptest.check(results[1][2] != 0, f"the second node exit {results[1][2]}")
    ddptest.check(not fstest.probes(gate), "a worker ran although the template failed")
    print("a failed import: reported at the first launch, after the round closed, one line")


def main():
    ddptest.require_torch()
    tmp = ddptest.temp_dir("ddpfs_")
    try:
        check_failing_import(tmp)
        check_import_overlaps_rendezvous(tmp)
        check_signals_during_import(tmp)
        check_failed_import_waits_for_launch(tmp)
        check_sigkill_leaves_nothing(tmp)
        check_restart_and_signal(tmp)
        check_stacks_and_term(tmp)
        check_ddp(tmp)
    finally:
        ddptest.remove_tree(tmp)


if __name__ == "__main__":
    main()
    print("ok")
