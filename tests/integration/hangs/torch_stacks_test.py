"""kill -QUIT <ddprun> on a two-rank PyTorch 1.13 gloo job: rank 1 sleeps inside a named
function, rank 0 waits in all_reduce. The report shows both ranks' Python frames, goes to the log
directory and the event log, and the job keeps running to exit 0; a user's own sitecustomize
(on PYTHONPATH) still runs in every worker."""
import glob
import json
import os
import signal
import time

import ddptest

WORKER = os.path.join(os.path.dirname(__file__), "workers", "torch_stacks.py")

USER_SITECUSTOMIZE = """import os
with open(os.path.join(os.environ["DDP_TEST_OUT"], "sitecustomize_rank" + os.environ["RANK"]),
          "w") as f:
    f.write("ran")
"""


def main():
    ddptest.require_torch()
    tmp = ddptest.temp_dir("ddptest_stacks_")
    proc = None
    try:
        out = os.path.join(tmp, "out")
        site = os.path.join(tmp, "usersite")
        logs = os.path.join(tmp, "logs")
        for d in (out, site):
            os.makedirs(d)
        with open(os.path.join(site, "sitecustomize.py"), "w") as f:
            f.write(USER_SITECUSTOMIZE)
        events = os.path.join(tmp, "events.jsonl")
        stderr_path = os.path.join(tmp, "stderr.txt")
        with open(stderr_path, "w") as stderr:
            proc = ddptest.spawn(
                [ddptest.bin_path("ddprun"), "--nproc_per_node=2", "--python",
                 ddptest.TORCH_PYTHON, "--log_dir", logs, "--event_log", events, WORKER, out],
                env={"PYTHONPATH": site, "DDP_TEST_OUT": out}, stdout=stderr, stderr=stderr)
            ready = ddptest.wait_until(
                lambda: all(os.path.exists(os.path.join(out, f"ready_rank{r}")) for r in (0, 1)),
                timeout=60)
            ddptest.check(ready, f"the workers never got ready:\n{open(stderr_path).read()}")
            # Rank 0 enters all_reduce right after its ready mark; give a loaded machine a moment
            # so that the report finds it there.
            time.sleep(0.5)
            ddptest.check(proc.poll() is None, "ddprun ended before SIGQUIT")
            os.kill(proc.pid, signal.SIGQUIT)
            ddptest.wait_until(lambda: glob.glob(os.path.join(logs, "*", "stacks_0.txt")), 30)
            reports = glob.glob(os.path.join(logs, "*", "stacks_0.txt"))
            ddptest.check(reports, f"no report in the log dir:\n{open(stderr_path).read()}")
            report = open(reports[0]).read()
            for needle in ("rank 0 (python", "rank 1 (python", "in sleep_inside_named_function",
                           "in wait_in_all_reduce", "in all_reduce", "2 rank(s) on 1 node(s)"):
                ddptest.check(needle in report, f"report lacks {needle!r}:\n{report}")
            ddptest.check(proc.poll() is None, f"SIGQUIT ended the job:\n{report}")
            open(os.path.join(out, "go"), "w").close()
            rc = proc.wait(timeout=60)
        log = open(stderr_path).read()
        ddptest.check(rc == 0, f"the job must run on to exit 0 after SIGQUIT, got {rc}:\n{log}")
        ddptest.check("in sleep_inside_named_function" in log, f"no report on stderr:\n{log}")
        for r in (0, 1):
            ddptest.check(os.path.exists(os.path.join(out, f"sitecustomize_rank{r}")),
                          f"rank {r}: the user's sitecustomize did not run:\n{log}")
        stacks = [e for e in map(json.loads, open(events)) if e["event"] == "stacks"]
        ddptest.check(len(stacks) == 1 and stacks[0]["reason"] == "SIGQUIT" and
                      stacks[0]["path"] == reports[0], f"stacks event: {stacks}")
        print("SIGQUIT: both Python stacks reported; the job ran on to exit 0; the user's "
              "sitecustomize ran in both workers")
    finally:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        ddptest.remove_tree(tmp)


if __name__ == "__main__":
    main()
