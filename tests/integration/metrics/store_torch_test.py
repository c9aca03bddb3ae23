"""The store's counters move with real PyTorch 1.13 TCPStore traffic (issue 19): on `ddp-store
serve --metrics_port`, and on the store a ddprun agent hosts, through the agent's endpoint."""

import os
import signal
import subprocess
import sys
import uuid

import ddptest
import metrics_util

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "store"))
import store_servers  # noqa: E402  (the store tests' server launcher)

HERE = os.path.dirname(os.path.abspath(__file__))
N = 20


def requests(command):
    return f'ddp_store_requests_total{{command="{command}"}}'


def delta(before, after, series):
    return after.get(series, 0) - before.get(series, 0)


def standalone_store():
    metrics_port = ddptest.free_port()
    with store_servers.ddp_store(extra=("--metrics_port", str(metrics_port),
                                        "--metrics_addr", "127.0.0.1")) as server:
        before = metrics_util.samples(metrics_util.scrape(metrics_port))
        client = [ddptest.TORCH_PYTHON, os.path.join(HERE, "torch_store_client.py"),
                  server.host, str(server.port)]
        waiter = ddptest.spawn(client + ["wait"], stdout=subprocess.PIPE, text=True)
        try:
            metrics_util.wait_for_sample(metrics_port, "ddp_store_waiters", lambda v: v >= 1)
            ddptest.run(client + ["traffic", str(N)], timeout=60, check_rc=0)
            out, _ = waiter.communicate(timeout=30)
            ddptest.check(waiter.returncode == 0 and "woken" in out, f"waiter: {out}")
        finally:
            if waiter.poll() is None:
                os.killpg(waiter.pid, signal.SIGKILL)
                waiter.communicate()
        after = metrics_util.wait_for_sample(metrics_port, "ddp_store_connections",
                                             lambda v: v == 0)
        moved = {series: delta(before, after, series) for series in after}
        checks = {
            requests("set"): moved[requests("set")] >= N + 1,
            requests("get"): moved[requests("get")] >= N,
            requests("add"): moved[requests("add")] >= 1,
            requests("wait"): moved[requests("wait")] >= 1,
            "ddp_store_received_bytes_total": moved["ddp_store_received_bytes_total"] > N * 1024,
            "ddp_store_sent_bytes_total": moved["ddp_store_sent_bytes_total"] > N * 1024,
            "ddp_store_connections_accepted_total":
                moved["ddp_store_connections_accepted_total"] >= 2,
            "ddp_store_keys": after["ddp_store_keys"] >= N + 2,
            "ddp_store_waiters": after["ddp_store_waiters"] == 0,
        }
        bad = {k: (before.get(k), after.get(k)) for k, ok in checks.items() if not ok}
        ddptest.check(not bad, f"store counters did not move as expected: {bad}")
        print(f"ddp-store serve: set +{moved[requests('set')]:.0f}, "
              f"received +{moved['ddp_store_received_bytes_total']:.0f} bytes")


def agent_hosted_store():
    tmp = ddptest.temp_dir("ddptest_storemetrics_")
    tag = f"DDP_TEST_TAG={uuid.uuid4()}"
    metrics_port = ddptest.free_port()
    agent = ddptest.spawn(
        [ddptest.bin_path("ddprun"), "--nproc_per_node", "2", "--metrics_port", str(metrics_port),
         "--metrics_addr", "127.0.0.1", "--python", ddptest.TORCH_PYTHON,
         os.path.join(HERE, "torch_store_worker.py"), tmp],
        env={"DDP_TEST_TAG": tag.split("=")[1]}, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    try:
        ddptest.check(ddptest.wait_until(
            lambda: all(os.path.exists(os.path.join(tmp, f"ready_rank{r}")) for r in (0, 1)), 60),
            "workers did not write to the store")
        last = metrics_util.wait_for_sample(metrics_port, requests("set"), lambda v: v >= 2)
        ddptest.check(last["ddp_store_received_bytes_total"] > 2 * 4096 and
                      last["ddp_store_sent_bytes_total"] > 2 * 4096 and
                      last["ddp_store_keys"] >= 2 and last["ddp_store_connections"] >= 2,
                      f"agent-hosted store counters: {last}")
        print(f"agent-hosted store: {last[requests('set')]:.0f} sets, "
              f"{last['ddp_store_connections']:.0f} connections")
        agent.send_signal(signal.SIGTERM)
        agent.communicate(timeout=60)
    finally:
        if agent.poll() is None:
            os.killpg(agent.pid, signal.SIGKILL)
            agent.communicate()
        ddptest.check(ddptest.wait_until(lambda: not ddptest.processes_with_env(tag), 10),
                      f"processes left behind: {ddptest.processes_with_env(tag)}")
        ddptest.remove_tree(tmp)


def main():
    ddptest.require_torch()
    standalone_store()
    agent_hosted_store()
    print("ok")


if __name__ == "__main__":
    main()
