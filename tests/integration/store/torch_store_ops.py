"""Every operation of PyTorch 1.13's TCPStore client against a server at HOST PORT; prints one JSON
object of outcomes, so the same run against ddp-store and against PyTorch's own server can be
compared. Run by /usr/bin/python3 (needs torch)."""

import datetime
import hashlib
import json
import os
import sys
import threading
import time

from torch.distributed import TCPStore

host, port = sys.argv[1], int(sys.argv[2])


def client(timeout=10.0, world_size=None):
    return TCPStore(host, port, world_size, False, datetime.timedelta(seconds=timeout))


out = {}
s = client(world_size=1)  # world_size: the client also does ADD init/ 1

s.set("k1", "v1")
out["get"] = s.get("k1").decode()
s.set("empty", b"")
out["empty"] = s.get("empty").hex()
binary = bytes(range(256)) * 4
s.set("bin", binary)
out["binary_intact"] = s.get("bin") == binary
big = os.urandom(4 << 20)
s.set("big", big)
got = s.get("big")
out["big_len"] = len(got)
out["big_intact"] = hashlib.sha256(got).digest() == hashlib.sha256(big).digest()
s.set("ключ/ü", "ünï")
out["unicode"] = s.get("ключ/ü").decode()

out["add"] = [s.add("cnt", 5), s.add("cnt", -2), s.add("cnt", 0)]
out["add_text"] = s.get("cnt").decode()
out["add_new"] = s.add("fresh", 0)

out["cas_equal"] = s.compare_set("k1", "v1", "v2").decode()
out["cas_different"] = s.compare_set("k1", "zzz", "v3").decode()
out["cas_create"] = s.compare_set("newk", "", "x").decode()
out["cas_missing"] = s.compare_set("missing", "exp", "y").decode()
out["cas_missing_stored"] = s.num_keys()

out["num_keys"] = s.num_keys()
out["delete"] = [s.delete_key("k1"), s.delete_key("k1")]
out["num_keys_after_delete"] = s.num_keys()

s.wait(["cnt", "bin"])
out["wait_existing"] = True

# wait times out on a missing key: 1.13 raises RuntimeError("Socket Timeout").
start = time.monotonic()
try:
    s.wait(["nokey"], datetime.timedelta(seconds=0.5))
    out["wait_timeout"] = "returned"
except RuntimeError as e:
    out["wait_timeout"] = str(e)
out["wait_timeout_waited"] = time.monotonic() - start >= 0.45
s2 = client()
start = time.monotonic()
s2.set_timeout(datetime.timedelta(seconds=0.3))
try:
    s2.get("never")
    out["get_timeout"] = "returned"
except RuntimeError as e:
    out["get_timeout"] = str(e)
s2.set_timeout(datetime.timedelta(seconds=10))

# A get that blocks until another client sets the key, and a wait on several keys.
def later():
    time.sleep(0.2)
    writer = client()
    writer.set("late1", "L1")
    writer.set("late2", "L2")

thread = threading.Thread(target=later)
thread.start()
out["blocking_get"] = s2.get("late1").decode()
client().wait(["late1", "late2"])
thread.join()
out["waited_many"] = True

# Several clients (threads, one TCPStore each) adding to one counter.
def adder():
    c = client()
    for _ in range(100):
        c.add("shared", 1)

threads = [threading.Thread(target=adder) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
out["shared_counter"] = s.get("shared").decode()
out["final_num_keys"] = s.num_keys()
print(json.dumps(out, sort_keys=True))
