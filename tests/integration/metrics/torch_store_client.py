"""PyTorch 1.13's TCPStore client traffic for the store-metrics test. Run by /usr/bin/python3.

usage: torch_store_client.py HOST PORT traffic N   # N sets and gets of 1 KiB, one add, sets "late"
       torch_store_client.py HOST PORT wait        # waits for the key "late", then exits 0
"""

import datetime
import sys

from torch.distributed import TCPStore

host, port, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
store = TCPStore(host, port, None, False, datetime.timedelta(seconds=60))
if mode == "wait":
    store.wait(["late"])
    print("woken", flush=True)
else:
    n = int(sys.argv[4])
    for i in range(n):
        store.set(f"metrics/key{i}", b"x" * 1024)
    for i in range(n):
        assert store.get(f"metrics/key{i}") == b"x" * 1024
    store.add("metrics/counter", 5)
    store.set("late", b"now")
    print("done", flush=True)
