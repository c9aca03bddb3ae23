"""etcd rendezvous over https with mutual TLS, on a real 3-member etcd 3.4 cluster whose client
URLs demand a client certificate (a throwaway CA made with the openssl CLI): 3 agents x 2 workers
form a --nnodes=2:3 job (one member named localhost, two by IP); the etcd member a surviving agent
uses is killed, its keep-alives and watch move to another member over TLS; an agent ends by
SIGTERM and the other two re-form at world 4. A CA that did not sign
the members' certificates, and a missing client certificate, each end the agent within its join
timeout with one error line naming every member and the cause.
"""

import glob
import json
import os
import signal
import sys
import time

import ddptest
import etcdtest
from ddptest import check

HOLD = os.path.join(ddptest.SOURCE_DIR, "tests/integration/multinode/hold_worker.py")


def envs(out_dir, world):
    return [json.load(open(f))["env"]
            for f in glob.glob(os.path.join(out_dir, f"env_rank*_world{world}_attempt*.json"))]


def tls_conf(certs, extra=""):
    conf = (f"protocol=https,cacert={certs}/ca.crt,cert={certs}/client.crt,"
            f"key={certs}/client.key")
    return conf + ("," + extra if extra else "")


def one_error_line(result, what):
    errors = [l for l in result.stderr.splitlines() if "error" in l]
    check(result.returncode == 1, f"{what}: exit {result.returncode}\n{result.stderr}")
    check(len(errors) == 1, f"{what}: expected one error line, got {errors}")
    return errors[0]


work = ddptest.temp_dir("ddptest_etcd_tls_")
procs = []
try:
    certs = etcdtest.make_certs(os.path.join(work, "certs"))
    other = etcdtest.make_certs(os.path.join(work, "other"))  # a CA the cluster does not know
    with etcdtest.Cluster(tls_dir=certs) as cluster:
        members = cluster.endpoints.split(",")
        # The first member by name: its certificate must name localhost (a DNS SAN), the others
        # 127.0.0.1 (an IP SAN).
        endpoints = ",".join(["localhost:" + members[0].split(":")[1]] + members[1:])

        # A CA that did not sign the members' certificates: one line, well within join_timeout.
        cmd = etcdtest.agent_cmd(cluster.endpoints, "wrong-ca", 2, 1, ["/bin/true"],
                                 conf=f"protocol=https,cacert={other}/ca.crt,"
                                      f"cert={certs}/client.crt,key={certs}/client.key,"
                                      "join_timeout=20", extra=["--no_python"])
        line = one_error_line(ddptest.run(cmd, timeout=40), "wrong CA")
        check("TLS failed with every etcd member" in line
              and line.count(f"does not verify against cacert={other}/ca.crt") == 3
              and all(m in line for m in members),
              f"wrong CA: {line}")
        print(f"ok wrong CA: {line}")

        # No client certificate: the members refuse the connection.
        cmd = etcdtest.agent_cmd(cluster.endpoints, "no-cert", 2, 1, ["/bin/true"],
                                 conf=f"protocol=https,cacert={certs}/ca.crt,join_timeout=20",
                                 extra=["--no_python"])
        line = one_error_line(ddptest.run(cmd, timeout=40), "no client certificate")
        check("wants a client certificate" in line, f"no client certificate: {line}")
        print(f"ok no client certificate: {line}")

        out = os.path.join(work, "job")
        os.makedirs(out)
        cmd = etcdtest.agent_cmd(endpoints, "tls", "2:3", 2, [sys.executable, HOLD, out, "6"],
                                 conf=tls_conf(certs, "lease_ttl=2,last_call_timeout=1"),
                                 extra=["--max_restarts=0"])
        procs, logs = etcdtest.spawn_agents([cmd] * 3, work, "agent")
        check(ddptest.wait_until(lambda: len(envs(out, 6)) == 6, 60),
              "world 6 did not start over https:\n" + "\n".join(etcdtest.read(l) for l in logs))
        texts = [etcdtest.read(l) for l in logs]
        check(all("(https)" in t for t in texts), "an agent does not say it uses https")
        check(sorted(int(e["RANK"]) for e in envs(out, 6)) == list(range(6)), "ranks of world 6")
        print("ok 3 agents x 2 workers formed over https with mutual TLS")

        leaving = next(i for i, t in enumerate(texts) if "group_rank=2 " in t)
        survivor = (leaving + 1) % 3
        used = [i for i, m in enumerate(endpoints.split(","))
                if f"via etcd member {m}" in texts[survivor]]
        check(len(used) == 1, f"which etcd member the survivor uses: {used}")
        cluster.kill_member(used[0])
        time.sleep(3)  # past the 2 s TTL: the survivor's keep-alives must have moved on
        os.kill(procs[leaving].pid, signal.SIGTERM)
        others = [i for i in range(3) if i != leaving]
        codes = etcdtest.wait_all([procs[i] for i in others], 60)
        texts = [etcdtest.read(logs[i]) for i in others]
        check(codes == [0, 0], f"exit codes {codes}:\n" + "\n".join(texts))
        world4 = envs(out, 4)
        check(sorted(int(e["RANK"]) for e in world4) == [0, 1, 2, 3], "ranks of world 4")
        check(all(e["TORCHELASTIC_RESTART_COUNT"] == "0" for e in world4), "a restart was spent")
        print(f"ok etcd member {endpoints.split(',')[used[0]]} killed: the survivors moved over "
              "TLS and re-formed at world 4 without the SIGTERMed agent")
finally:
    etcdtest.kill_all(procs)
    ddptest.remove_tree(work)
