"""Issue 33: TORCHELASTIC_ENABLE_FILE_TIMER=1 with PyTorch 1.13's real FileTimerClient. The agent
serves the named pipe (TORCHELASTIC_TIMER_FILE, given or generated and passed to the workers), a
released timer does nothing, and a worker whose timer expires gets its signal (SIGKILL): the job
fails as torchrun's does, with 128+9, and the pipe is removed at exit."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "agent"))
import agenttest  # noqa: E402
import ddptest  # noqa: E402
from ddptest import check  # noqa: E402

WORKER = """\
import os, sys, time
import torch.distributed.elastic.timer as timer
from torch.distributed.elastic.timer import FileTimerClient
path = os.environ["TORCHELASTIC_TIMER_FILE"]
with open(os.path.join(sys.argv[1], "timer_file_rank" + os.environ["RANK"]), "w") as f:
    f.write(path)
timer.configure(FileTimerClient(path))
with timer.expires(after=2, scope="released_step"):
    pass
if os.environ["RANK"] == "1" and sys.argv[2] == "hang":
    with timer.expires(after=1, scope="stuck_step"):
        time.sleep(120)
print("done rank", os.environ["RANK"], flush=True)
"""


def run(work, mode, env):
    script = os.path.join(work, "timed.py")
    with open(script, "w") as f:
        f.write(WORKER)
    return ddptest.run([agenttest.ddprun(), "--nproc_per_node=2", "--python", ddptest.TORCH_PYTHON,
                        script, work, mode], timeout=120,
                       env=dict({"TORCHELASTIC_ENABLE_FILE_TIMER": "1"}, **env))


def main():
    ddptest.require_torch()
    work = ddptest.temp_dir()
    try:
        given = os.path.join(work, "timer.pipe")
        result = run(work, "release", {"TORCHELASTIC_TIMER_FILE": given})
        agenttest.expect_exit(result, 0, "released timers")
        check(result.stdout.count("done rank") == 2, f"stdout: {result.stdout}")
        seen = {open(os.path.join(work, f"timer_file_rank{r}")).read() for r in (0, 1)}
        check(seen == {given}, f"workers saw {seen}, expected {given}")
        check(not os.path.exists(given), "the timer pipe outlived the run")
        print("ok released timers: the job succeeds, the pipe is gone after it")

        tmp = os.path.join(work, "tmp")
        os.makedirs(tmp)
        result = run(work, "hang", {"TORCHELASTIC_TIMER_FILE": "", "TMPDIR": tmp})
        agenttest.expect_exit(result, 137, "an expired timer")
        check("file timer expired" in result.stderr and "scopes=stuck_step" in result.stderr
              and "sending SIGKILL" in result.stderr, f"no expiry line:\n{result.stderr}")
        check("done rank 0" in result.stdout and "done rank 1" not in result.stdout,
              f"stdout: {result.stdout}")
        path = open(os.path.join(work, "timer_file_rank1")).read()
        check(path.startswith(os.path.join(tmp, "watchdog_timer_")), f"generated path {path}")
        check(not os.path.exists(path), "the generated pipe outlived the run")
        print("ok an expired timer kills its worker (exit 137); the generated pipe is removed")
    finally:
        ddptest.remove_tree(work)


if __name__ == "__main__":
    main()
