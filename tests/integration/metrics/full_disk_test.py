"""A full disk (a 64 KiB tmpfs in a private mount namespace, filled up) under --event_log and
--log_dir (issue 19): ddprun says so once on stderr per kind of output, and exits 74 instead of 0
when the job succeeded but its event log was lost; a failed job keeps its worker's exit code.
Needs root (mount)."""

import os
import sys

import ddptest

LOST_EVENTS = "cannot write the event log"
LOST_LOGS = "cannot write the worker log"


def ddprun(tmp, *args):
    cmd = [ddptest.bin_path("ddprun"), "--nproc_per_node", "2", *args]
    return ddptest.run(cmd, timeout=60)


def inside(tmp):
    full = os.path.join(tmp, "full")
    with open(os.path.join(full, "filler"), "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError:
            pass  # ENOSPC: the tmpfs is full
    events = os.path.join(full, "events.jsonl")

    ok = ddprun(tmp, "--event_log", events, "--no_python", "true")
    ddptest.check(ok.returncode == 74, f"full event log, job succeeded: exit {ok.returncode} "
                  f"(expected 74)\n{ok.stderr}")
    ddptest.check(ok.stderr.count(LOST_EVENTS) == 1 and "No space left on device" in ok.stderr,
                  f"expected one '{LOST_EVENTS}' line naming ENOSPC:\n{ok.stderr}")
    ddptest.check("event log is incomplete" in ok.stderr, f"no closing error line:\n{ok.stderr}")

    failed = ddprun(tmp, "--event_log", events, "--no_python", "sh", "-c", "exit 3")
    ddptest.check(failed.returncode == 3, f"failed job with a full event log: exit "
                  f"{failed.returncode} (expected the worker's 3)\n{failed.stderr}")
    ddptest.check(failed.stderr.count(LOST_EVENTS) == 1, f"warnings:\n{failed.stderr}")

    # Two ranks x two streams redirected into a disk that the workers fill up once the agent has
    # set up the log directory: one warning, and the job's own result.
    os.remove(os.path.join(full, "filler"))
    fill = f"dd if=/dev/zero of={full}/filler_$RANK bs=4k 2>/dev/null; echo out; echo err >&2"
    logs = ddprun(tmp, "--log_dir", os.path.join(full, "logs"), "--redirects", "3",
                  "--no_python", "sh", "-c", fill)
    ddptest.check(logs.returncode == 0, f"full log dir: exit {logs.returncode}\n{logs.stderr}")
    ddptest.check(logs.stderr.count(LOST_LOGS) == 1, f"expected one '{LOST_LOGS}' line:\n"
                  f"{logs.stderr}")

    # The same runs with room on the disk stay silent and exit 0.
    for rank in (0, 1):
        os.remove(os.path.join(full, f"filler_{rank}"))
    fine = ddprun(tmp, "--event_log", events, "--no_python", "true")
    ddptest.check(fine.returncode == 0 and LOST_EVENTS not in fine.stderr,
                  f"event log with room: exit {fine.returncode}\n{fine.stderr}")
    print("full disk: exit 74 and one warning; failed job keeps 3; worker logs warned once")


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "inside":
        inside(sys.argv[2])
        return
    ddptest.require_root()
    tmp = ddptest.temp_dir("ddptest_fulldisk_")
    try:
        os.mkdir(os.path.join(tmp, "full"))
        inner = ('mount -t tmpfs -o size=64k tmpfs "$1/full" && '
                 'exec /usr/bin/python3 "$0" inside "$1"')
        result = ddptest.run(["unshare", "-m", "sh", "-c", inner, __file__, tmp], timeout=120)
        ddptest.check(result.returncode == 0,
                      f"exit {result.returncode}\n{result.stdout}{result.stderr}")
        print(result.stdout, end="")
    finally:
        ddptest.remove_tree(tmp)
    print("ok")


if __name__ == "__main__":
    main()
