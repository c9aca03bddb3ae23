"""Issue 33, torchrun 2.9-2.11 parity and errors before anything starts, with the real ddprun:
- a missing script, -m module or interpreter: one line, exit 2, no worker started;
- --duplicate_stdout_filters / --duplicate_stderr_filters (both spellings and PET_*) copy the
  matching teed lines to <attempt>/filtered_stdout.log / filtered_stderr.log;
- ${hostname} and ${pid} in --log_line_prefix_template;
- TORCHELASTIC_HEALTH_CHECK_PORT answers while the agent still waits in the rendezvous;
- --print_completion bash completes options in a real bash.
"""
import glob
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "agent"))
import agenttest  # noqa: E402
import ddptest  # noqa: E402
from ddptest import check  # noqa: E402


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def one_line_error(result, needle, what):
    agenttest.expect_exit(result, 2, what)
    lines = result.stderr.splitlines()
    check(len(lines) == 1 and lines[0].startswith("ddprun: error: ") and needle in lines[0],
          f"{what}: expected one error line with {needle!r}, got:\n{result.stderr}")
    check(result.stdout == "", f"{what}: a worker wrote {result.stdout!r}")


def errors_before_start(work):
    marker = os.path.join(work, "started")
    script = write(os.path.join(work, "touch.py"), f"open({marker!r}, 'w').close()\n")
    base = [agenttest.ddprun(), "--nproc_per_node=2"]
    result = ddptest.run(base + ["--python", sys.executable, os.path.join(work, "no_such.py")])
    one_line_error(result, "training_script: '", "a missing .py")
    result = ddptest.run(base + ["--python", sys.executable, "-m", "ddprun_no_such_module"])
    one_line_error(result, "-m/--module: no module named 'ddprun_no_such_module'", "a missing -m")
    result = ddptest.run(base + ["--python", "/nonexistent/python3", script])
    one_line_error(result, "--python: interpreter '/nonexistent/python3'", "a missing --python")
    result = ddptest.run(base + [script], env={"PYTHON_EXEC": "python_no_such_version"})
    one_line_error(result, "PYTHON_EXEC: 'python_no_such_version' not found", "PYTHON_EXEC")
    check(not os.path.exists(marker), "a worker started")
    # A module that exists runs: the check does not import it (its package's __init__ would fail
    # only in the finder, which must not run it).
    pkg = os.path.join(work, "pkg")
    os.makedirs(pkg)
    write(os.path.join(pkg, "__init__.py"), "")
    write(os.path.join(pkg, "train.py"), f"open({marker!r}, 'w').close()\n")
    result = ddptest.run(base + ["--python", sys.executable, "-m", "pkg.train"], cwd=work)
    agenttest.expect_exit(result, 0, "-m pkg.train")
    check(os.path.exists(marker), "-m pkg.train did not run")
    print("ok a missing script, module or interpreter: one line, exit 2, no worker")


def filters_and_prefix(work):
    script = write(os.path.join(work, "talk.py"), "\n".join([
        "import os, sys",
        "print(f'step 1 loss=0.{os.environ[\"RANK\"]} pid={os.getpid()}', flush=True)",
        "print('boring line', flush=True)",
        "print('warn: a,b', file=sys.stderr, flush=True)",
        "print('quiet', file=sys.stderr, flush=True)", ""]))
    host = "parity-node"
    for spelling, env in [("--duplicate_stdout_filters=loss,nothing", {}),
                          ("--duplicate-stdout-filters=loss", {}),
                          (None, {"PET_DUPLICATE_STDOUT_FILTERS": "loss"})]:
        logs = ddptest.temp_dir()
        args = ["--nproc_per_node=2", "--tee=3", f"--log_dir={logs}",
                "--log_line_prefix_template=[${hostname}|${pid}|${rank}]:",
                "--duplicate_stderr_filters=a,,b", script]
        if spelling:
            args.insert(0, spelling)
        result = agenttest.launch(args, env=dict(env, DDPRUN_NODE_NAME=host))
        agenttest.expect_exit(result, 0, f"filters {spelling or env}")
        attempt = glob.glob(os.path.join(logs, "*", "attempt_0"))
        check(len(attempt) == 1, f"no attempt dir under {logs}")
        out = open(os.path.join(attempt[0], "filtered_stdout.log")).read().splitlines()
        err = open(os.path.join(attempt[0], "filtered_stderr.log")).read().splitlines()
        check(len(out) == 2 and all("loss=" in line for line in out),
              f"filtered_stdout.log: {out}")
        for line in out:  # the prefix names the host and the worker's own pid
            prefix, text = line.split("]:", 1)
            _, pid, rank = prefix.lstrip("[").split("|")
            check(prefix.startswith(f"[{host}|") and text.endswith(f"pid={pid}")
                  and f"loss=0.{rank}" in text, f"prefix does not match the worker: {line}")
        want = sorted(line.split("]:", 1)[0] + "]:warn: a,b" for line in out)
        check(sorted(err) == want, f"filtered_stderr.log: {err}, expected {want}")
        check(f"[{host}|" in result.stdout and "boring line" in result.stdout,
              f"console lines lost their prefix:\n{result.stdout}")
        ddptest.remove_tree(logs)
    print("ok duplicate filters (both spellings, PET_*) and ${hostname}/${pid} prefixes")


def health_check(work):
    port = ddptest.free_port()
    # Node 0 of two waits in the rendezvous for node 1: the health check already answers.
    proc = ddptest.spawn([agenttest.ddprun(), "--nnodes=2", "--node_rank=0",
                          f"--master_port={ddptest.free_port()}", "--no_python", "true"],
                         env={"TORCHELASTIC_HEALTH_CHECK_PORT": str(port)},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        def answer():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as reply:
                    return reply.status, json.loads(reply.read())
            except (urllib.error.URLError, ConnectionError, socket.timeout):
                return None
        got = ddptest.wait_until(answer, timeout=20)
        check(got is not None, "the health check never answered during the rendezvous")
        status, body = got
        check(status == 200 and body["alive"] is True and body["version"] == 1
              and abs(body["last_progress_time"] - time.time()) < 30, f"health reply: {got}")
    finally:
        proc.kill()
        proc.communicate()
    result = ddptest.run([agenttest.ddprun(), "--no_python", "true"],
                         env={"TORCHELASTIC_HEALTH_CHECK_PORT": "http"})
    one_line_error(result, "TORCHELASTIC_HEALTH_CHECK_PORT: expected a port number",
                   "a bad health port")
    print("ok TORCHELASTIC_HEALTH_CHECK_PORT answers during the rendezvous")


def completion(work):
    for spelling in ("--print_completion", "--print-completion"):
        for shell in ("bash", "zsh", "tcsh"):
            result = ddptest.run([agenttest.ddprun(), spelling, shell], check_rc=0)
            check("ddprun" in result.stdout, f"{shell}: {result.stdout[:200]}")
    script = ddptest.run([agenttest.ddprun(), "--print_completion", "bash"], check_rc=0).stdout
    probe = write(os.path.join(work, "complete.sh"), script + "\n".join([
        'COMP_WORDS=(ddprun --nproc); COMP_CWORD=1; _ddprun; echo "1:${COMPREPLY[*]}"',
        'COMP_WORDS=(ddprun --rdzv_backend c); COMP_CWORD=2; _ddprun; echo "2:${COMPREPLY[*]}"',
        'COMP_WORDS=(ddprun train.py --nproc); COMP_CWORD=2; _ddprun; echo "3:${COMPREPLY[*]}"',
        ""]))
    lines = ddptest.run(["bash", probe], check_rc=0, cwd=work).stdout.splitlines()
    check(lines[0] == "1:--nproc_per_node --nproc-per-node", f"options: {lines}")
    check(lines[1] == "2:c10d", f"backend choices: {lines}")
    check(lines[2] == "3:", f"ddprun's options offered after the script: {lines}")
    result = ddptest.run([agenttest.ddprun(), "--print_completion", "fish"])
    one_line_error(result, "--print_completion: invalid choice 'fish'", "fish")
    print("ok --print_completion bash|zsh|tcsh; bash completes options and choices")


def main():
    work = ddptest.temp_dir()
    try:
        errors_before_start(work)
        filters_and_prefix(work)
        health_check(work)
        completion(work)
    finally:
        ddptest.remove_tree(work)


if __name__ == "__main__":
    main()
