"""A real Prometheus server scrapes a running ddprun: promtool accepts the exposition, bad HTTP
requests get a 400 while the agent keeps serving, and after one worker failure Prometheus' query
API reports ddprun_restarts_total 1 and ddprun_world_size 2 (issue 19). Also: a taken
--metrics_port stops ddprun at launch with exit 1."""

import json
import os
import shutil
import signal
import socket
import subprocess
import urllib.parse
import urllib.request
import uuid

import ddptest
import metrics_util

# Rank 0 fails once (first attempt); then both ranks run until the agent stops them.
WORKER = ('if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && [ "$LOCAL_RANK" = 0 ]; then exit 1; fi; '
          'exec sleep 120')

PROMETHEUS_CONFIG = """global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: ddprun
    static_configs:
      - targets: ["127.0.0.1:{port}"]
"""


def promtool_check(text):
    result = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                            text=True, timeout=30)
    ddptest.check(result.returncode == 0 and not result.stdout.strip()
                  and not result.stderr.strip(),
                  f"promtool check metrics: exit {result.returncode}\n{result.stdout}"
                  f"{result.stderr}")


def bad_request(port, payload):
    """Sends payload, returns what the server answers before it closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(payload)
        reply = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                return reply.decode(errors="replace")
            reply += chunk


def query(prom_port, expr):
    """The value of an instant query with one result, or None."""
    url = f"http://127.0.0.1:{prom_port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            doc = json.load(reply)
    except OSError:
        return None
    result = doc.get("data", {}).get("result", [])
    return float(result[0]["value"][1]) if len(result) == 1 else None


def taken_port():
    """A taken --metrics_port stops ddprun before any worker starts: exit 1, naming the flag."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = ddptest.run([ddptest.bin_path("ddprun"), "--metrics_port", str(port),
                              "--metrics_addr", "127.0.0.1", "--no_python", "true"], timeout=30)
    ddptest.check(result.returncode == 1 and f"--metrics_port {port}" in result.stderr
                  and "in use" in result.stderr,
                  f"taken metrics port: exit {result.returncode}\n{result.stderr}")


def main():
    taken_port()
    ddptest.require(shutil.which("prometheus") and shutil.which("promtool"),
                    "prometheus and promtool are not installed (apt-get install prometheus)")
    tmp = ddptest.temp_dir("ddptest_prom_")
    tag = f"DDP_TEST_TAG={uuid.uuid4()}"
    metrics_port = ddptest.free_port()
    agent = prometheus = None
    try:
        agent = ddptest.spawn(
            [ddptest.bin_path("ddprun"), "--nproc_per_node", "2", "--max_restarts", "1",
             "--metrics_port", str(metrics_port), "--metrics_addr", "127.0.0.1",
             "--log_dir", os.path.join(tmp, "logs"), "--no_python", "sh", "-c", WORKER],
            env={tag.split("=")[0]: tag.split("=")[1]}, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True)
        last = metrics_util.wait_for_sample(metrics_port, "ddprun_restarts_total",
                                            lambda v: v == 1)
        last = metrics_util.wait_for_sample(metrics_port, 'ddprun_workers{state="running"}',
                                            lambda v: v == 2)
        ddptest.check(last["ddprun_world_size"] == 2 and last["ddprun_up"] == 1,
                      f"after the restart: {last}")
        ddptest.check(last['ddprun_worker_exits_total{reason="exit"}'] >= 1, f"{last}")
        promtool_check(metrics_util.scrape(metrics_port))

        # Bad input: a 400 and a closed connection each; the agent goes on serving.
        for payload in (b"\x16\x03\x01\x02\x00garbage\r\n\r\n",
                        b"GET /metrics HTTP/1.1\r\nX: " + b"x" * 20000 + b"\r\n\r\n"):
            reply = bad_request(metrics_port, payload)
            ddptest.check(reply.startswith("HTTP/1.1 400"), f"bad request answered {reply!r}")
        silent = socket.create_connection(("127.0.0.1", metrics_port), timeout=5)
        silent.sendall(b"GET /met")  # a half request stays open while others are served
        ddptest.check("ddprun_up 1" in metrics_util.scrape(metrics_port), "scrape after bad input")
        silent.close()

        prom_port = ddptest.free_port()
        config = os.path.join(tmp, "prometheus.yml")
        with open(config, "w") as f:
            f.write(PROMETHEUS_CONFIG.format(port=metrics_port))
        prometheus = ddptest.spawn(
            ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={tmp}/data",
             f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        values = {}

        def scraped():
            for expr in ("ddprun_restarts_total", "ddprun_world_size", 'up{job="ddprun"}'):
                values[expr] = query(prom_port, expr)
            return (values["ddprun_restarts_total"] == 1 and values["ddprun_world_size"] == 2
                    and values['up{job="ddprun"}'] == 1)

        ddptest.check(ddptest.wait_until(scraped, 40, interval=0.25),
                      f"Prometheus' query API never showed the expected values: {values}")
        print(f"prometheus on :{prom_port} scraped ddprun on :{metrics_port}: {values}")

        agent.send_signal(signal.SIGTERM)
        out, _ = agent.communicate(timeout=60)
        ddptest.check(agent.returncode == 128 + signal.SIGTERM,
                      f"ddprun exit {agent.returncode}\n{out}")
        ddptest.check(out.count("bad request from 127.0.0.1") == 2,
                      f"expected one log line per bad request:\n{out}")
    finally:
        for proc in (agent, prometheus):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
        ddptest.check(ddptest.wait_until(lambda: not ddptest.processes_with_env(tag), 10),
                      f"processes left behind: {ddptest.processes_with_env(tag)}")
        ddptest.remove_tree(tmp)
    print("ok")


if __name__ == "__main__":
    main()
