"""Munge under SLURM, the way a user hits it: `srun -N2 ddprun` on the 2-node test cluster (whose
munged cluster-up.sh runs on the default socket), with no token file and no flag. Both agents say
they authenticate with munge, the workers of both nodes meet in node 0's store (node 1's by the
address its agent authenticated from), and while the job runs an outsider on the bridge (the
root namespace, 10.214.0.1) is refused: a plain TCPStore SET and GET, a HELLO answered with no
credential, with a credential of another user (nobody, over the right challenge) and with one
of the job's user over a stale challenge. The job's keys are untouched, every rank finishes, and
node 0's agent logs the outsider once."""
import glob
import json
import os
import struct
import subprocess
import sys
import uuid

import ddptest
import slurmtest
from ddptest import check

from tcpstore_wire import GET, HELLO, SET, connect, read_some, text
MUNGE_CONTEXT = b"ddprun store munge v1\0"
NOBODY = "nobody"


def plain(address, request, reply_bytes):
    """'refused' when the store closes the connection without answering a TCPStore request."""
    s = connect(address)
    try:
        s.sendall(request)
        got = read_some(s, reply_bytes)
    finally:
        s.close()
    return "refused" if got == b"" else f"ANSWERED {got.hex()}"


def credential(user, payload):
    """A munge credential over `payload` made by `user` (munge's own client, on stdin)."""
    cmd = ["munge"] if user is None else ["runuser", "-u", user, "--", "munge"]
    out = subprocess.run(cmd, input=payload, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         check=True, timeout=10).stdout
    return out.strip()


def with_credential(address, run_id, user, stale):
    """HELLO, then a munge credential; 'refused' when the store answers 03 or closes."""
    s = connect(address)
    try:
        s.sendall(HELLO)
        challenge = read_some(s, 33)
        if len(challenge) != 33 or challenge[0] != 4:
            return f"no munge challenge: {challenge.hex()}"
        nonce = os.urandom(32) if stale else challenge[1:]
        cred = credential(user, MUNGE_CONTEXT + run_id.encode() + b"\0" + nonce)
        # 1.13 GET behind the credential: it would be answered if the credential were accepted.
        s.sendall(struct.pack(">H", len(cred)) + cred + bytes([GET]) + text("/slurm_test/joined"))
        verdict = read_some(s, 1 + 8)
    finally:
        s.close()
    return "refused" if verdict in (b"", b"\x03") else f"ANSWERED {verdict.hex()}"


def no_credential(address):
    """HELLO, then nothing but a TCPStore request where the credential belongs."""
    s = connect(address)
    try:
        s.sendall(HELLO)
        read_some(s, 33)
        s.sendall(bytes([SET]) + text("/slurm_test/joined") + text("9"))
        verdict = read_some(s, 1)
    finally:
        s.close()
    return "refused" if verdict in (b"", b"\x03") else f"ANSWERED {verdict.hex()}"


def main():
    slurmtest.require_slurm()
    work = ddptest.temp_dir("ddpslmunge_")
    hold = os.path.join(work, "release")
    tag = str(uuid.uuid4())
    srun = None
    try:
        with slurmtest.cluster(2):
            exports = ",".join(["ALL", f"DDP_TEST_TAG={tag}", f"DDP_TEST_HOLD_FILE={hold}"])
            env = dict(os.environ, **slurmtest.ENV)
            env.pop("DDPRUN_TOKEN_FILE", None)
            srun = subprocess.Popen(
                ["srun", "-N2", "--ntasks-per-node=1", "-J", "ddpsl-munge", f"--export={exports}",
                 ddptest.bin_path("ddprun"), "--nproc_per_node=2", "--python", sys.executable,
                 f"--log_dir={work}/logs", "--log_level=info",
                 os.path.join(slurmtest.HERE, "store_peer.py"), work],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                start_new_session=True)
            slurmtest.wait_files(work, [f"peer_rank{r}.json" for r in range(4)], timeout=60)
            records = [json.load(open(f)) for f in glob.glob(os.path.join(work, "peer_rank*.json"))]
            run_id = records[0]["env"]["TORCHELASTIC_RUN_ID"]
            store = (slurmtest.NODE0_ADDR, int(records[0]["env"]["MASTER_PORT"]))
            results = {
                "plain_set": plain(store, bytes([SET]) + text("/slurm_test/joined") + text("9"), 1),
                "plain_get": plain(store, bytes([GET]) + text("/slurm_test/joined"), 16),
                "hello_without_credential": no_credential(store),
                "another_users_credential": with_credential(store, run_id, NOBODY, stale=False),
                "stale_challenge": with_credential(store, run_id, None, stale=True),
            }
            open(hold, "w").close()
            out, err = srun.communicate(timeout=60)
            report = f"results {results}\nsrun exit {srun.returncode}\n--- stderr\n{err}"
            check(all(v == "refused" for v in results.values()), f"every attack refused\n{report}")
            check(srun.returncode == 0, f"the job finishes unaffected\n{report}")
            ranks = sorted(int(r["env"]["RANK"]) for r in records)
            check(ranks == [0, 1, 2, 3], f"ranks {ranks}\n{report}")
            check(sorted(r["joined"] for r in records) == [1, 2, 3, 4],
                  f"the store's counter saw the 4 workers only\n{report}")
            job = records[0]["env"]["SLURM_JOB_ID"]
            check(err.count(f"SLURM job {job}: agents authenticate with munge credentials") == 2,
                  f"both agents use munge\n{report}")
            refusals = [line for line in err.splitlines()
                        if "store refused" in line and f"from {slurmtest.HOST_ADDR}" in line]
            check(len(refusals) == 1, f"the outsider logged once\n{report}")
            slurmtest.wait_gone(f"DDP_TEST_TAG={tag}", timeout=10)
            print(report)
    finally:
        if srun and srun.poll() is None:
            os.killpg(srun.pid, 9)
            srun.communicate()
        ddptest.remove_tree(work)
    print("OK")


if __name__ == "__main__":
    main()
