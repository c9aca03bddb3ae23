"""Nobody outside the job can touch its stores (docs/security.md). Network namespaces ddpn1..3:
nodes 1 and 2 run a c10d job of real PyTorch 1.13 workers, node 3 is the outsider.

secret: the job has a token file. While its workers wait, the outsider tries a forged round
close, taking a rank, reading and deleting the run's keys, a SET and a GET on the workers'
store, a connection flood on both stores, a handshake captured off the bridge from node 2's
agent and replayed, a ddprun agent with a wrong secret, and PyTorch's own TCPStore client
against the workers' store. Every attempt is refused, the job finishes with the right ranks,
the host logs the outsider once and counts it in /metrics.

static: a static 2-node job with a secret; node 1's store admits node 2's PyTorch workers by
the address node 2's authenticated agent connects from.

open: no secret. The host warns that its rendezvous store is open; the workers' store still
refuses the outsider at accept (member check), and the job finishes unaffected.

multi-homed: every namespace also sits on a second bridge (10.231.0.N, eth1). A c10d job without
a secret joins over the first bridge; each worker reaches the workers' store through the host's
second address, so node 2's worker connects from node 2's second address, which only its
agent's report of every address its node holds makes a member: both are served. The outsider,
on the second bridge too, is still refused there."""

import json
import os
import subprocess
import sys
import time
import urllib.request

import ddptest
from ddptest import check

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "../multinode")]
import netns_rig  # noqa: E402
from netns_rig import Cluster, addr  # noqa: E402
from sniffer import Sniffer  # noqa: E402

WORKER = os.path.join(HERE, "guarded_worker.py")
OUTSIDER = os.path.join(HERE, "outsider.py")

ENV = {"GLOO_SOCKET_IFNAME": "eth0"}
PORT = 29400
TORCH_CLIENT = """
import datetime, sys, torch.distributed as dist
try:
    s = dist.TCPStore(sys.argv[1], int(sys.argv[2]), None, False, datetime.timedelta(seconds=5))
    s.set("/probe", "evil")
    print("ANSWERED", s.get("/probe"))
except Exception as e:
    print("refused", type(e).__name__, e)
"""


def token_file(directory, name, text):
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        f.write(text + "\n")
    os.chmod(path, 0o600)
    return path


def job_args(run_id, conf, out_dir):
    args = netns_rig.c10d_args("2", run_id, conf) + ["--log_level=info"]
    args[args.index("--python") + 1] = ddptest.TORCH_PYTHON
    return args + [WORKER, out_dir]


def worker_store(out_dir):
    path = os.path.join(out_dir, "store_rank0.json")
    check(ddptest.wait_until(lambda: os.path.exists(path), 90, 0.1), "the workers never started")
    with open(path) as f:
        doc = json.load(f)
    return doc["master_addr"], doc["master_port"]


def in_outsider(cmd, timeout=60):
    return ddptest.run(["ip", "netns", "exec", "ddpn3", *cmd], timeout=timeout)


def finish_job(cluster_agents, out_dir):
    open(os.path.join(out_dir, "go"), "w").close()
    errs = []
    for n, p in cluster_agents:
        rc, err = netns_rig.finish(p, 90, f"agent on node {n}")
        check(rc == 0, f"agent on node {n} exited {rc}\n{err}")
        errs.append(err)
    results = [json.load(open(os.path.join(out_dir, f"result_rank{r}.json"))) for r in (0, 1)]
    check(sorted(r["rank"] for r in results) == [0, 1], f"ranks: {results}")
    check(all(r["world_size"] == 2 and r["sum"] == 3.0 for r in results), f"group: {results}")
    check(all(r["probe"] == "job" for r in results), f"the probe key changed: {results}")
    return errs, results


def scrape(node, port):
    code = f"import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:{port}/metrics', timeout=5).read().decode())"
    return ddptest.run(["ip", "netns", "exec", f"ddpn{node}", sys.executable, "-c", code],
                       timeout=20, check_rc=0).stdout


def with_secret(tmp):
    out_dir = ddptest.temp_dir()
    secret = token_file(tmp, "job.token", "the-job-secret-of-issue-31-0123456789")
    wrong = token_file(tmp, "wrong.token", "not-the-job-secret-of-issue-31-98765")
    run_id = "guarded"
    try:
        with Cluster(3) as c:
            sniffer = Sniffer("ddpv2", PORT)
            host = c.start(1, ["--metrics_port=9400"] +
                           job_args(run_id, f"token_file={secret}", out_dir), env=ENV)
            other = c.start(2, job_args(run_id, f"token_file={secret}", out_dir), env=ENV)
            captured = sniffer.wait(60)
            check(captured is not None, "no handshake captured from node 2's agent")
            master_addr, master_port = worker_store(out_dir)
            check(master_addr == addr(1), f"workers' store at {master_addr}")
            attack = in_outsider([sys.executable, OUTSIDER, addr(1), str(PORT), master_addr,
                                  str(master_port), run_id, captured.hex(), "100"])
            check(attack.returncode == 0, f"outsider failed\n{attack.stderr}")
            results = json.loads(attack.stdout)
            torch_client = in_outsider([ddptest.TORCH_PYTHON, "-c", TORCH_CLIENT, master_addr,
                                        str(master_port)])
            results["torch_client"] = torch_client.stdout.split(" ")[0].strip() or \
                torch_client.stderr[-300:]
            intruder = in_outsider([ddptest.bin_path("ddprun")] +
                                   job_args(run_id, f"token_file={wrong}", out_dir), timeout=60)
            results["wrong_secret"] = "refused" if (
                intruder.returncode != 0 and "refused this agent's job secret" in intruder.stderr
            ) else f"rc={intruder.returncode} {intruder.stderr[-400:]}"
            print(json.dumps(results, indent=1))
            check(len(results) == 10, f"an attack did not run: {sorted(results)}")
            for name, verdict in results.items():
                check(verdict == "refused", f"attack {name} was not refused: {verdict}")
            metrics = scrape(1, 9400)
            errs, ranks = finish_job([(1, host), (2, other)], out_dir)
        host_err = errs[0]
        check(next(r for r in ranks if r["rank"] == 0)["group_rank"] == 0, "host not group 0")
        lines = [l for l in host_err.splitlines() if "store refused" in l and addr(3) in l]
        check(len(lines) == 1, f"outsider logged {len(lines)} times:\n" + "\n".join(lines))
        check("agents authenticate" in host_err, "host did not say agents authenticate")
        check("is open to its network" not in host_err, "warned about an open store")
        refused = sum(float(l.split()[-1]) for l in metrics.splitlines()
                      if l.startswith("ddp_store_refused_total"))
        authenticated = [l for l in metrics.splitlines()
                         if l.startswith("ddp_store_authenticated_total")]
        check(refused >= 200, f"refusals counted: {refused}\n{metrics}")
        check(authenticated and float(authenticated[0].split()[-1]) >= 3, "no agent counted")
    finally:
        ddptest.remove_tree(out_dir)


def static_with_secret(tmp):
    """A static 2-node job with a secret: node 1's store admits node 2's PyTorch workers from the
    address its authenticated agent connected from."""
    out_dir = ddptest.temp_dir()
    secret = token_file(tmp, "static.token", "the-static-job-secret-0123456789")
    try:
        with Cluster(2) as c:
            open(os.path.join(out_dir, "go"), "w").close()  # nothing to wait for
            agents = [(n, c.start(n, ["--nnodes=2", f"--node_rank={n - 1}",
                                      f"--master_addr={addr(1)}", "--master_port=29500",
                                      "--nproc_per_node=1", "--log_level=info",
                                      f"--rdzv_conf=token_file={secret}",
                                      "--python", ddptest.TORCH_PYTHON, WORKER, out_dir], env=ENV))
                      for n in (1, 2)]
            errs, _ = finish_job(agents, out_dir)
        check("agents authenticate" in errs[0], f"node 0 did not guard its store:\n{errs[0]}")
    finally:
        ddptest.remove_tree(out_dir)


def without_secret():
    out_dir = ddptest.temp_dir()
    try:
        with Cluster(3) as c:
            host = c.start(1, job_args("open", "", out_dir), env=ENV)
            other = c.start(2, job_args("open", "", out_dir), env=ENV)
            master_addr, master_port = worker_store(out_dir)
            attack = in_outsider([sys.executable, OUTSIDER, addr(1), "0", master_addr,
                                  str(master_port), "open", "-", "20"])
            check(attack.returncode == 0, f"outsider failed\n{attack.stderr}")
            results = json.loads(attack.stdout)
            print(json.dumps(results, indent=1))
            check(results == {"worker_key_set": "refused", "worker_key_read": "refused",
                              "flood": "refused"}, f"not refused: {results}")
            errs, _ = finish_job([(1, host), (2, other)], out_dir)
        check("c10d rendezvous store at 10.213.0.1:29400 is open to its network" in errs[0],
              f"no open-store warning:\n{errs[0]}")
        check("is open to its network" not in errs[1], "a non-host agent warned")
    finally:
        ddptest.remove_tree(out_dir)


SECOND_BRIDGE = "ddps31b"


def second_addr(node):
    return f"10.231.0.{node}"


def add_second_bridge(nodes):
    """A second bridge in the root namespace and an eth1 on it in every node namespace."""
    remove_second_bridge()  # a run killed before its cleanup left it behind
    cmds = [["ip", "link", "add", SECOND_BRIDGE, "type", "bridge"],
            ["ip", "link", "set", SECOND_BRIDGE, "up"]]
    for n in range(1, nodes + 1):
        veth = f"{SECOND_BRIDGE}v{n}"
        cmds += [["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth1", "netns",
                  f"ddpn{n}"],
                 ["ip", "link", "set", veth, "master", SECOND_BRIDGE],
                 ["ip", "link", "set", veth, "up"],
                 ["ip", "-n", f"ddpn{n}", "addr", "add", f"{second_addr(n)}/24", "dev", "eth1"],
                 ["ip", "-n", f"ddpn{n}", "link", "set", "eth1", "up"]]
    for cmd in cmds:
        ddptest.run(cmd, timeout=10, check_rc=0)


def remove_second_bridge():
    subprocess.run(["ip", "link", "del", SECOND_BRIDGE], capture_output=True, timeout=10)


def multi_homed():
    out_dir = ddptest.temp_dir()
    worker = os.path.join(HERE, "second_address_worker.py")
    env = dict(ENV, DDP_SECOND_ADDR=second_addr(1))
    try:
        with Cluster(3) as c:
            add_second_bridge(3)
            args = netns_rig.c10d_args("2", "multihomed", "") + ["--log_level=info", worker, out_dir]
            agents = [(n, c.start(n, args, env=env)) for n in (1, 2)]
            paths = [os.path.join(out_dir, f"second_rank{r}.json") for r in (0, 1)]
            check(ddptest.wait_until(lambda: all(os.path.exists(p) for p in paths), 90, 0.1),
                  "the workers never reached the workers' store")
            results = [json.load(open(p)) for p in paths]
            check(all(r["ok"] for r in results), f"a worker was refused: {results}")
            check(sorted(r.get("source") for r in results) == [second_addr(1), second_addr(2)],
                  f"the workers did not connect from their second addresses: {results}")
            attack = in_outsider([sys.executable, OUTSIDER, addr(1), "0", second_addr(1),
                                  str(results[0]["port"]), "multihomed", "-", "0"])
            check(attack.returncode == 0, f"outsider failed\n{attack.stderr}")
            verdicts = json.loads(attack.stdout)
            print(json.dumps({"workers": results, "outsider": verdicts}, indent=1))
            check(verdicts == {"worker_key_set": "refused", "worker_key_read": "refused"},
                  f"the outsider on the second bridge was not refused: {verdicts}")
            open(os.path.join(out_dir, "go"), "w").close()
            for n, p in agents:
                rc, err = netns_rig.finish(p, 90, f"agent on node {n}")
                check(rc == 0, f"agent on node {n} exited {rc}\n{err}")
    finally:
        remove_second_bridge()
        ddptest.remove_tree(out_dir)


netns_rig.require_rig()
ddptest.require_torch()
tmp = ddptest.temp_dir()
try:
    started = time.monotonic()
    with_secret(tmp)
    print(f"ok every outsider attack refused; the job finished ({time.monotonic() - started:.0f} s)")
    started = time.monotonic()
    static_with_secret(tmp)
    print(f"ok a static job with a secret admits its workers ({time.monotonic() - started:.0f} s)")
    started = time.monotonic()
    without_secret()
    print(f"ok without a secret the workers' store admits members only ({time.monotonic() - started:.0f} s)")
    started = time.monotonic()
    multi_homed()
    print(f"ok a multi-homed node's worker is admitted from its second address, the outsider is "
          f"not ({time.monotonic() - started:.0f} s)")
finally:
    ddptest.remove_tree(tmp)
