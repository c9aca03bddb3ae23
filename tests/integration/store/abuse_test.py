"""Issue 15's table against a real `ddp-store serve`: while each misbehaving client (store_abuse.py)
does its worst, a probe doing GETNUMKEYS every 10 ms is answered; memory is released after the
large key is deleted; unread replies and an unread watcher hold bounded memory; an APPEND past the
value limit is refused with one log line; PyTorch 1.13's own client is served afterwards. Prints
each case's worst probe wait and RSS (figures, never asserted as timings)."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import ddptest  # noqa: E402
import store_abuse  # noqa: E402
import store_servers  # noqa: E402
from ddptest import check  # noqa: E402

TORCH_CLIENT = """
import datetime, sys
from torch.distributed import TCPStore
store = TCPStore("127.0.0.1", int(sys.argv[1]), None, False, datetime.timedelta(seconds=30))
store.set("after", "abuse")
assert store.get("after") == b"abuse", store.get("after")
print("torch client served", flush=True)
"""


def main():
    ddptest.require_torch()
    with store_servers.ddp_store() as server:
        pid = server.proc.pid
        results = {}
        for name in store_abuse.CASES:
            kwargs = {"seconds": 2.0} if name == "flood" else {}
            r = store_abuse.run_case(server.host, server.port, pid, name, **kwargs)
            results[name] = r
            print(f"{name:13s} probe worst {r['worst_ms']:7.1f} ms p99 {r['p99_ms']:6.1f} ms "
                  f"({r['probes_during']} answered during {r['abuse_s']:.2f} s of abuse); "
                  f"server RSS {r['rss_before_mb']:.0f} -> peak {r['rss_peak_mb']:.0f} -> "
                  f"{r['rss_after_mb']:.0f} MB", flush=True)
        for name in ("big_set", "flood", "append", "multi_get"):
            # The probe asks 100 times a second; a server that serves others only between an
            # abuser's bursts answers a handful (5 in 4 s of flood before issue 15). Asked: 10 a
            # second, which a loaded 2-core machine meets with room to spare.
            r = results[name]
            check(r["probes_during"] >= 10 * r["abuse_s"],
                  f"{name}: the probe was answered {r['probes_during']} times in "
                  f"{r['abuse_s']:.2f} s of abuse: {r}")
        check(results["append"]["size_mib"] == 100, f"append: {results['append']}")
        held = results["multi_get"]["rss_held_mb"] - results["multi_get"]["rss_before_mb"]
        check(held < 300, f"multi_get: unread replies hold {held:.0f} MB of server memory")
        readers = results["readers"]
        check(readers["rss_after_mb"] < readers["rss_before_mb"] + 64,
              f"readers: RSS {readers['rss_after_mb']:.0f} MB after the 128 MiB key was deleted "
              f"(was {readers['rss_before_mb']:.0f} MB before it was set)")
        limit = results["append_limit"]
        check(limit["second_refused"], "append_limit: the APPEND past 1 GiB was not refused")
        check(limit["size_mib"] == 600, f"append_limit: the value is {limit['size_mib']} MiB")
        check(results["watcher"]["watcher_closed"], "watcher: the unread watcher stayed open")
        watched = results["watcher"]["rss_peak_mb"] - results["watcher"]["rss_before_mb"]
        check(watched < 300, f"watcher: its queue grew the server by {watched:.0f} MB")
        out = ddptest.run([ddptest.TORCH_PYTHON, "-c", TORCH_CLIENT, str(server.port)],
                          timeout=60, check_rc=0)
        check("torch client served" in out.stdout, out.stdout)
        rc, err = server.stop()
    check(rc == 0, f"ddp-store exited {rc}\n{err}")
    refusals = [line for line in err.splitlines() if "exceed the value limit" in line]
    check(len(refusals) == 1 and "APPEND(/abuse/huge)" in refusals[0],
          f"expected one log line refusing the APPEND past the limit, got {refusals}")
    watcher_lines = [line for line in err.splitlines() if "does not read what it watches" in line]
    check(len(watcher_lines) == 1, f"expected one line closing the watcher, got {watcher_lines}")
    print("ok every abuse case: probe served meanwhile, memory bounded, torch client served after")


main()
