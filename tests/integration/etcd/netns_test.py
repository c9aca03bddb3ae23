"""etcd rendezvous across network-namespace nodes (scripts/netns-cluster.sh): 3 nodes, each with
one etcd 3.4 member and one ddprun agent (2 workers, --nnodes=2:3, --max_restarts=0). The node
whose agent hosts the workers' store (group rank 0) is then lost, two ways, one job each:
SIGKILL of that agent (its etcd member lives on), and its link cut (its etcd member and agent
are cut off together; the cluster keeps its quorum). Each time the two other agents re-form at
world 4 with a store on one of them, spend no restart, and finish; the cut-off agent ends with
one line naming etcd. The first job speaks plain http to etcd, the second https with mutual TLS
(the members serve both, the https port with --client-cert-auth).

First, the round's workers' store admits the round's nodes only: a 3-node job whose workers all
meet in group rank 0's store (admitted by the addresses in their nodes' member records), while
an outsider in a fourth namespace on the same bridge (no etcd member, no agent) tries a SET and
a GET there, and at the host's link store where the other agents hold their links, and is
refused at both (logged once, counted in /metrics); the job finishes. The same with a job
secret: the agents authenticate to the link store, the outsider is refused there.

Needs root; run under `flock /tmp/ddprun-netns.lock` (ctest's RESOURCE_LOCK netns only orders
the tests of one ctest run).
"""

import glob
import json
import os
import signal
import subprocess
import sys

import ddptest
import etcdtest
from ddptest import check

sys.path.insert(0, os.path.join(ddptest.SOURCE_DIR, "tests/integration/multinode"))
import netns_rig  # noqa: E402

HOLD = os.path.join(ddptest.SOURCE_DIR, "tests/integration/multinode/hold_worker.py")
NODES = (1, 2, 3)
CLIENT, PEER, CLIENT_TLS = 2379, 2380, 2381


def endpoints(port):
    return ",".join(f"{netns_rig.addr(i)}:{port}" for i in NODES)


def start_etcd(rig, work, certs, etcds):
    """Members serve plain http on CLIENT and https with --client-cert-auth on CLIENT_TLS."""
    cluster = ",".join(f"m{i}=http://{netns_rig.addr(i)}:{PEER}" for i in NODES)
    for i in NODES:
        a = netns_rig.addr(i)
        client = f"http://{a}:{CLIENT},https://{a}:{CLIENT_TLS}"
        peer = f"http://{a}:{PEER}"
        cmd = ["ip", "netns", "exec", f"ddpn{i}", "etcd", "--name", f"m{i}",
               "--data-dir", os.path.join(work, f"m{i}"),
               "--listen-client-urls", client, "--advertise-client-urls", client,
               "--cert-file", f"{certs}/server.crt", "--key-file", f"{certs}/server.key",
               "--client-cert-auth", "--trusted-ca-file", f"{certs}/ca.crt",
               "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
               "--initial-cluster", cluster, "--initial-cluster-token", "ddprun-netns",
               "--initial-cluster-state", "new", "--log-level", "warn", "--logger", "zap"]
        with open(os.path.join(work, f"m{i}.log"), "w") as log:
            etcds.append(ddptest.spawn(cmd, stdout=log, stderr=subprocess.STDOUT))

    def has_leader():  # from the root namespace, over the bridge
        return subprocess.run(["etcdctl", f"--endpoints={endpoints(CLIENT)}", "--command-timeout=1s",
                               "get", "/probe"], env=dict(os.environ, ETCDCTL_API="3"),
                              capture_output=True, timeout=10).returncode == 0
    check(ddptest.wait_until(has_leader, 20, interval=0.1), "the netns etcd cluster has no leader")


def envs(out_dir, world):
    return [json.load(open(f))["env"]
            for f in glob.glob(os.path.join(out_dir, f"env_rank*_world{world}_attempt*.json"))]


def lose_store_host(rig, work, run_id, how, ttl, certs=None):
    """certs: over https with mutual TLS (the members' certificates carry their IPs)."""
    out = os.path.join(work, run_id)
    os.makedirs(out)
    conf = f"lease_ttl={ttl},last_call_timeout=1,join_timeout=30,read_timeout=10"
    if certs:
        conf += (f",protocol=https,cacert={certs}/ca.crt,cert={certs}/client.crt,"
                 f"key={certs}/client.key")
    args = ["--nnodes=2:3", "--nproc_per_node=2", "--rdzv_backend=etcd",
            f"--rdzv_endpoint={endpoints(CLIENT_TLS if certs else CLIENT)}",
            f"--rdzv_id={run_id}", "--max_restarts=0", f"--rdzv_conf={conf}",
            "--log_level=info", "--python", sys.executable, HOLD, out, "6"]
    agents = {i: rig.start(i, args) for i in NODES}
    check(ddptest.wait_until(lambda: len(envs(out, 6)) == 6, 40),
          f"{run_id}: world 6 did not start on 3 nodes")
    masters = {(e["MASTER_ADDR"], e["MASTER_PORT"]) for e in envs(out, 6)}
    check(len(masters) == 1, f"{run_id}: several stores in world 6: {masters}")
    host_addr = next(iter(masters))[0]
    host = next(i for i in NODES if netns_rig.addr(i) == host_addr)
    if how == "kill":
        os.killpg(agents[host].pid, signal.SIGKILL)
        agents[host].communicate()
    else:
        rig.cut(host)
    for i in NODES:
        if i == host:
            continue
        rc, err = netns_rig.finish(agents[i], 60, f"{run_id}: the agent on node {i}")
        check(rc == 0, f"{run_id}: the agent on node {i} exited {rc}:\n{err}")
        check("lost node(s): " in err, f"{run_id}: node {i} did not see the loss:\n{err}")
    world4 = envs(out, 4)
    check(sorted(int(e["RANK"]) for e in world4) == [0, 1, 2, 3],
          f"{run_id}: ranks of world 4: {sorted(int(e['RANK']) for e in world4)}")
    check(all(e["TORCHELASTIC_RESTART_COUNT"] == "0" for e in world4),
          f"{run_id}: the node loss spent a restart")
    new_masters = {e["MASTER_ADDR"] for e in world4}
    check(len(new_masters) == 1 and host_addr not in new_masters,
          f"{run_id}: world 4's store {new_masters} (the lost host was {host_addr})")
    if how == "cut":
        # The cut-off agent cannot keep its lease alive (its own member lost quorum): it ends
        # with one line naming etcd, rather than running on as a ghost.
        rc, err = netns_rig.finish(agents[host], 60, f"{run_id}: the cut-off agent")
        errors = [l for l in err.splitlines() if l.startswith("ddprun: error:")]
        check(rc != 0 and len(errors) == 1 and "etcd" in errors[0],
              f"{run_id}: the cut-off agent exited {rc}:\n{err}")
        print(f"ok cut: the cut-off agent ended: {errors[0]}")
    print(f"ok {how} ({'https' if certs else 'http'}): store host node {host} lost; nodes "
          f"{[i for i in NODES if i != host]} re-formed at world 4 with the store on "
          f"{new_masters.pop()}, no restart spent")
    return host


PEER_WORKER = os.path.join(ddptest.SOURCE_DIR, "tests/integration/slurm/store_peer.py")
OUTSIDER = os.path.join(ddptest.SOURCE_DIR, "tests/integration/security/outsider.py")
OUTSIDER_NODE = 4


def link_port_of(run_id, host_addr):
    """The link store port of the round's host, as the round's header in etcd names it."""
    got = subprocess.run(["etcdctl", f"--endpoints={endpoints(CLIENT)}", "get", "--prefix",
                          f"/ddprun/{run_id}/", "--print-value-only"],
                         env=dict(os.environ, ETCDCTL_API="3"), capture_output=True, text=True,
                         timeout=10)
    for line in got.stdout.splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict) and "round" in doc and doc.get("master_addr") == host_addr:
            return doc["link_port"]
    check(False, f"{run_id}: no round header names {host_addr}:\n{got.stdout}{got.stderr}")


def scrape(node, port):
    code = ("import urllib.request; print(urllib.request.urlopen("
            f"'http://127.0.0.1:{port}/metrics', timeout=5).read().decode())")
    return ddptest.run(["ip", "netns", "exec", f"ddpn{node}", sys.executable, "-c", code],
                       timeout=20, check_rc=0).stdout


def counted(metrics, name):
    return sum(float(l.split()[-1]) for l in metrics.splitlines() if l.startswith(name))


def attack_from_outsider(run_id, host, port):
    attack = ddptest.run(["ip", "netns", "exec", f"ddpn{OUTSIDER_NODE}", sys.executable, OUTSIDER,
                          host, "0", host, str(port), run_id, "-", "0"], timeout=60)
    check(attack.returncode == 0, f"{run_id}: the outsider failed\n{attack.stderr}")
    return json.loads(attack.stdout)


def outsider_refused(rig, work, run_id, token=None):
    """Three agents' workers meet in group rank 0's store; the outsider node is refused there and
    at the host's link store, where the other agents hold their links (token: with a secret,
    which the agents present to the link store)."""
    out = os.path.join(work, run_id)
    os.makedirs(out)
    hold = os.path.join(out, "release")
    conf = "lease_ttl=2,join_timeout=30,read_timeout=10" + (f",token_file={token}" if token else "")
    args = ["--nnodes=3", "--nproc_per_node=1", "--rdzv_backend=etcd",
            f"--rdzv_endpoint={endpoints(CLIENT)}", f"--rdzv_id={run_id}", "--max_restarts=0",
            f"--rdzv_conf={conf}", "--log_level=info", "--metrics_port=9400",
            "--python", sys.executable, PEER_WORKER, out]
    agents = {i: rig.start(i, args, env={"DDP_TEST_HOLD_FILE": hold}) for i in NODES}
    records = [os.path.join(out, f"peer_rank{r}.json") for r in range(3)]
    check(ddptest.wait_until(lambda: all(os.path.exists(p) for p in records), 40),
          f"{run_id}: the workers did not all meet in the workers' store")
    env = json.load(open(records[0]))["env"]
    host_addr = env["MASTER_ADDR"]
    host = next(i for i in NODES if netns_rig.addr(i) == host_addr)
    verdicts = attack_from_outsider(run_id, host_addr, env["MASTER_PORT"])
    link = attack_from_outsider(run_id, host_addr, link_port_of(run_id, host_addr))
    verdicts.update({"link_key_set": link["worker_key_set"],
                     "link_key_read": link["worker_key_read"]})
    metrics = scrape(host, 9400)
    open(hold, "w").close()
    errs = {}
    for i in NODES:
        rc, err = netns_rig.finish(agents[i], 60, f"{run_id}: the agent on node {i}")
        check(rc == 0, f"{run_id}: the agent on node {i} exited {rc}:\n{err}")
        errs[i] = err
    check(set(verdicts.values()) == {"refused"}, f"{run_id}: the outsider was served: {verdicts}")
    joined = sorted(json.load(open(p))["joined"] for p in records)
    check(joined == [1, 2, 3], f"{run_id}: the store's counter saw {joined}")
    refusals = [l for l in errs[host].splitlines() if "store refused" in l]
    check(len(refusals) == 1 and netns_rig.addr(OUTSIDER_NODE) in refusals[0],
          f"{run_id}: the host logged refusals other than the outsider's once:\n" +
          "\n".join(refusals))
    check(counted(metrics, "ddp_store_refused_total") >= 4,
          f"{run_id}: the host counted too few refusals:\n{metrics}")
    if token:
        # Under etcd the link store is the one store of ddprun's that agents connect to: each of
        # the other two agents authenticates its two connections there.
        check(counted(metrics, "ddp_store_authenticated_total") >= 4,
              f"{run_id}: the members' links did not authenticate:\n{metrics}")
    print(f"ok {run_id}: the workers' store of {host_addr} admitted the 3 nodes' workers, its "
          f"link store the other agents, and both refused the outsider: {verdicts}")


def token_file(work):
    path = os.path.join(work, "job.token")
    with open(path, "w") as f:
        f.write("the-etcd-job-secret-of-issue-31-0123456789\n")
    os.chmod(path, 0o600)
    return path


netns_rig.require_rig()
etcdtest.require_etcd()
work = ddptest.temp_dir("ddptest_etcd_netns_")
etcds = []
try:
    with netns_rig.Cluster(len(NODES) + 1) as rig:  # the last namespace is the outsider
        try:
            certs = etcdtest.make_certs(os.path.join(work, "certs"),
                                        *(netns_rig.addr(i) for i in NODES))
            start_etcd(rig, work, certs, etcds)
            outsider_refused(rig, work, "netns-outsider")
            outsider_refused(rig, work, "netns-outsider-secret", token=token_file(work))
            lose_store_host(rig, work, "netns-kill", "kill", ttl=2)
            lose_store_host(rig, work, "netns-cut", "cut", ttl=5, certs=certs)
        finally:
            etcdtest.kill_all(etcds)
finally:
    ddptest.remove_tree(work)
