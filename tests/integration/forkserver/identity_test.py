"""--start_method=forkserver with real /usr/bin/python3 + PyTorch workers: a forked worker looks to
user code like an exec'd one. The probe worker runs under exec and under the forkserver (script,
-m, --run_path) and the records must agree: sys.executable, sys.path[0], __file__, sys.argv, the
command line ps shows, the environment, cwd, its own process group with ddprun as parent; only the forked worker finds torch
already imported; under both, the interpreter's end joins a thread still running, runs atexit
handlers and a global's __del__, flushes a file left open and removes a NamedTemporaryFile. Then
sys.exit(n) with atexit, an uncaught exception (exit 1, the traceback
without the template's frames, in the failure report), and DataLoader workers under fork and
spawn."""
import json
import os

import ddptest
import fstest

# Variables whose values name this run (ports, run ids, log paths): compared by presence only.
PER_RUN = {"MASTER_PORT", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_ERROR_FILE", "DDPRUN_STACK_DIR",
           "DDPRUN_PROGRESS_FILE", "PYTHONPATH"}
SAME = ("executable", "path0", "file", "name", "cwd", "main_file", "affinity")


def compare(exec_record, fork_record, what):
    for key in SAME:
        ddptest.check(exec_record[key] == fork_record[key],
                      f"{what}: {key} differs: exec {exec_record[key]!r}, "
                      f"forkserver {fork_record[key]!r}")
    # Each run writes to its own folder (argv[1]); the rest of argv must match exactly.
    exec_argv, fork_argv = list(exec_record["argv"]), list(fork_record["argv"])
    exec_argv[1] = fork_argv[1] = "OUT"
    ddptest.check(exec_argv == fork_argv, f"{what}: argv {exec_argv} vs {fork_argv}")
    # What ps and pgrep -f see: the worker's own command, not the template's.
    exec_line = ["OUT" if w == exec_record["argv"][1] else w for w in exec_record["cmdline"]]
    fork_line = ["OUT" if w == fork_record["argv"][1] else w for w in fork_record["cmdline"]]
    ddptest.check(exec_line == fork_line, f"{what}: /proc/PID/cmdline {exec_line} vs {fork_line}")
    exec_env, fork_env = exec_record["env"], fork_record["env"]
    ddptest.check(set(exec_env) == set(fork_env),
                  f"{what}: environment keys differ: {set(exec_env) ^ set(fork_env)}")
    for key, value in exec_env.items():
        if key not in PER_RUN:
            ddptest.check(fork_env[key] == value, f"{what}: {key}={fork_env[key]!r}, "
                                                  f"exec has {value!r}")


def check_interpreter_end(out, result, rank, what, globals_freed):
    """What the interpreter's end does that user code sees, done for rank's worker. Under
    --run_path the script's globals live in runpy's module, which even an exec'd interpreter
    does not free at its end (globals_freed False): there only threads and atexit count."""
    for line in ("atexit ran", "thread joined"):
        ddptest.check(f"{line} rank {rank}" in result.stdout,
                      f"{what}: no '{line} rank {rank}' at the worker's end:\n{result.stdout}")
    if not globals_freed:
        return
    ddptest.check(f"finalizer ran rank {rank}" in result.stdout,
                  f"{what}: no 'finalizer ran rank {rank}' at the worker's end:\n{result.stdout}")
    with open(os.path.join(out, f"left_open_rank{rank}.txt")) as f:
        written = f.read()
    ddptest.check(written == "written, never closed",
                  f"{what}: rank {rank}'s file left open holds {written!r}")
    left = [n for n in os.listdir(out) if n.startswith(f"temporary_rank{rank}_")]
    ddptest.check(not left, f"{what}: rank {rank}'s NamedTemporaryFile was not removed: {left}")


def run_both(tmp, name, entry, extra=(), globals_freed=True):
    records = []
    for method in ("spawn", "forkserver"):
        out = os.path.join(tmp, f"{name}_{method}")
        os.mkdir(out)
        result, pid = fstest.launch([f"--start_method={method}", "--nproc_per_node=2",
                                     "--log_level=info"] + list(extra) + entry + [out, "--arg", "0"],
                                    env={"PYTHONPATH": fstest.WORKERS}, cwd=tmp)
        fstest.expect_exit(result, 0, f"{name} under {method}")
        for rank in (0, 1):
            check_interpreter_end(out, result, rank, f"{name} {method}", globals_freed)
        got = fstest.probes(out)
        ddptest.check(sorted(got) == [0, 1], f"{name} {method}: probes {sorted(got)}")
        for rank, record in got.items():
            ddptest.check(record["ppid"] == pid, f"{method}: rank {rank}'s parent is "
                                                 f"{record['ppid']}, not ddprun {pid}")
            ddptest.check(record["pgid"] == record["pid"], f"{method}: not its own group")
            ddptest.check(record["torch_at_first_line"] == (method == "forkserver"),
                          f"{name} {method}: torch imported at the first line: "
                          f"{record['torch_at_first_line']}")
        ready = fstest.ready_lines(result.stderr)
        if method == "forkserver":
            ddptest.check(len(ready) == 1 and "preload=torch" in ready[0] and "threads=1" in ready[0],
                          f"{name}: forkserver ready line:\n{result.stderr}")
        else:
            ddptest.check(not ready, f"{name}: a forkserver under spawn:\n{result.stderr}")
        records.append(got)
    for rank in (0, 1):
        compare(records[0][rank], records[1][rank], f"{name} rank {rank}")
    print(f"{name}: exec and forkserver workers agree; the interpreter's end (threads joined, "
          f"atexit, finalizers, open files flushed, temporary files removed) under both")


def probe_once(tmp, name, args, code):
    """One forkserver worker running the probe with `args`; its output folder and result."""
    out = os.path.join(tmp, name)
    os.mkdir(out)
    result, _ = fstest.launch(fstest.FORKSERVER + ["--nproc_per_node=1", fstest.PROBE, out] + args,
                              timeout=120)
    fstest.expect_exit(result, code, f"the probe with {args}")
    return out, result


def check_exit_code(tmp):
    _, result = probe_once(tmp, "exit", ["--arg", "3"], 3)
    ddptest.check("atexit ran rank 0" in result.stdout, f"atexit:\n{result.stdout}")
    ddptest.check("exitcode  : 3" in result.stderr, f"the report:\n{result.stderr}")
    print("sys.exit(3): ddprun exits 3, the atexit handler ran, the report says 3")


def check_exception(tmp):
    _, result = probe_once(tmp, "raise", ["--mode", "raise"], 1)
    err = result.stderr
    ddptest.check("Traceback (most recent call last)" in err and
                  "ValueError: probe failure" in err, f"no traceback:\n{err}")
    ddptest.check("_forkserver" not in err, f"the template's frames are in the traceback:\n{err}")
    ddptest.check('forkserver_probe.py", line' in err, f"no frame of the script:\n{err}")
    ddptest.check("exitcode  : 1" in err, f"the report does not give exit code 1:\n{err}")
    print("uncaught exception: exit 1, the script's traceback in the report")


def check_loader(tmp):
    out, _ = probe_once(tmp, "loader", ["--mode", "loader", "--arg", "1"], 0)
    with open(os.path.join(out, "loader_rank0.json")) as f:
        sums = json.load(f)
    ddptest.check(sums == {"fork": 140, "spawn": 140}, f"DataLoader sums: {sums}")
    print("DataLoader with a worker under 'fork' and 'spawn': every batch arrived")


def main():
    ddptest.require_torch()
    tmp = ddptest.temp_dir("ddpfs_")
    try:
        run_both(tmp, "script", [fstest.PROBE])
        run_both(tmp, "module", ["-m", "forkserver_probe"])
        run_both(tmp, "run_path", ["--run_path", fstest.PROBE], globals_freed=False)
        check_exit_code(tmp)
        check_exception(tmp)
        check_loader(tmp)
    finally:
        ddptest.remove_tree(tmp)


if __name__ == "__main__":
    main()
    print("ok")
