"""Failures and restarts: a worker that fails once is restarted (new restart count, new attempt
prefix) and the job succeeds; when restarts run out, the report names the root-cause rank, its
exit code or signal and its stderr tail, and ddprun exits with that code (128+N for signal N)."""
import json
import os

import agenttest
import ddptest


def fail_once_restarts(tmp):
    out = os.path.join(tmp, "once"); os.mkdir(out)
    events = os.path.join(tmp, "once_events.jsonl")
    result = agenttest.launch(["--nproc_per_node=2", "--max_restarts=1", "--event_log", events,
                               agenttest.worker("fail_once.py"), out, "--rank", "1", "--code", "3"],
                              env={"DDP_TEST_HEALTHY_SECONDS": "0.5"})
    agenttest.expect_exit(result, 0, "fail once with --max_restarts=1")
    first, second = agenttest.env_dumps(out, 0), agenttest.env_dumps(out, 1)
    ddptest.check(sorted(first) == [0, 1] and sorted(second) == [0, 1],
                  f"attempts: {sorted(first)} {sorted(second)}")
    for rank in (0, 1):
        env0, env1 = first[rank]["env"], second[rank]["env"]
        ddptest.check(env1["TORCHELASTIC_RESTART_COUNT"] == "1", f"rank {rank} restart count")
        ddptest.check("attempt_1/" in env1["TORCHELASTIC_ERROR_FILE"] and
                      "attempt_0/" in env0["TORCHELASTIC_ERROR_FILE"], "attempt log dirs")
        ddptest.check(env1["TORCHELASTIC_MAX_RESTARTS"] == "1", "max restarts")
    lines = [json.loads(line) for line in open(events)]
    names = [e["event"] for e in lines]
    for name in ("rendezvous", "workers_started", "worker_exited", "workers_stopped", "restart",
                 "finish"):
        ddptest.check(name in names, f"event {name} missing: {names}")
    ddptest.check(names.count("workers_started") == 2, f"events: {names}")
    ddptest.check(lines[-1]["event"] == "finish" and lines[-1]["exit_code"] == 0,
                  f"last event {lines[-1]}")
    failed = [e for e in lines if e["event"] == "worker_exited" and e.get("exit_code") == 3]
    ddptest.check(len(failed) == 1 and failed[0]["rank"] == 1, f"worker_exited events {failed}")
    for e in lines:
        ddptest.check(e["version"] == 1 and e["wall_time"] > 1e9 and e["mono_time"] > 0,
                      f"timestamps of {e}")


def restarts_exhausted(tmp):
    out = os.path.join(tmp, "always"); os.mkdir(out)
    result = agenttest.launch(["--nproc_per_node=3", "--max_restarts=1",
                               agenttest.worker("fail_once.py"), out, "--rank", "2", "--code", "7",
                               "--lines", "30", "--always"],
                              env={"DDP_TEST_HEALTHY_SECONDS": "30"}, timeout=60)
    agenttest.expect_exit(result, 7, "restarts exhausted")
    err = result.stderr
    report = err[err.rfind("Root Cause"):]
    ddptest.check("fail_once.py FAILED" in err, f"report title missing:\n{err}")
    ddptest.check("rank      : 2 (local_rank: 2)" in report, f"root-cause rank:\n{report}")
    ddptest.check("exitcode  : 7" in report, f"exit code in report:\n{report}")
    ddptest.check("stderr line 29 of rank 2" in report and "stderr line 10 of rank 2" in report,
                  f"stderr tail:\n{report}")
    ddptest.check("stderr line 9 of rank 2" not in report, f"more than 20 lines:\n{report}")
    ddptest.check(err.rstrip().endswith("(the root cause's exit code)"),
                  f"the report is not last:\n{err[-500:]}")
    ddptest.check(sorted(agenttest.env_dumps(out, 1)) == [0, 1, 2], "the restart did not happen")


def killed_by_signal(tmp):
    out = os.path.join(tmp, "sig"); os.mkdir(out)
    result = agenttest.launch(["--nproc_per_node=2", agenttest.worker("fail_once.py"), out,
                               "--rank", "0", "--signal", "9", "--lines", "2"],
                              env={"DDP_TEST_HEALTHY_SECONDS": "30"}, timeout=60)
    agenttest.expect_exit(result, 128 + 9, "worker killed by SIGKILL")
    ddptest.check("(SIGKILL)" in result.stderr and "rank      : 0 (local_rank: 0)" in result.stderr,
                  f"signal report:\n{result.stderr}")


def main():
    tmp = ddptest.temp_dir()
    try:
        fail_once_restarts(tmp)
        restarts_exhausted(tmp)
        killed_by_signal(tmp)
    finally:
        ddptest.remove_tree(tmp)


if __name__ == "__main__":
    main()
    print("ok")
