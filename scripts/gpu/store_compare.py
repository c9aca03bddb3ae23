"""PyTorch's own TCPStore client (the running interpreter's torch, 2.x on the GPU machine) against
`ddp-store serve` and against PyTorch's own server, side by side: every operation of
tests/integration/store/torch_store_ops.py and scripts/gpu/torch2_store_ops.py. Prints one JSON
object (torch version, operations compared, mismatches, ddp-store's outcomes); exits 1 on a mismatch or a failed run.
Usage: store_compare.py DDP_STORE_BINARY"""

import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OPS = [os.path.join(ROOT, "tests/integration/store/torch_store_ops.py"),
       os.path.join(HERE, "torch2_store_ops.py")]
TORCH_SERVER = r"""
import datetime, sys
from torch.distributed import TCPStore
store = TCPStore("127.0.0.1", 0, None, True, datetime.timedelta(seconds=60))
print("listening on 127.0.0.1:%d" % store.port, flush=True)
sys.stdin.read()
"""


def start(cmd):
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    line = proc.stdout.readline()
    match = re.fullmatch(r"listening on (\S+):(\d+)\n", line)
    if not match:
        proc.kill()
        raise SystemExit(f"{cmd[0]} printed {line!r}: {proc.stderr.read()}")
    return proc, match.group(1), match.group(2)


def run_ops(script, host, port):
    result = subprocess.run([sys.executable, script, host, port], capture_output=True, text=True,
                            timeout=120)
    if result.returncode != 0:
        return {"failed": result.stderr.strip().splitlines()[-1:]}
    return json.loads(result.stdout)


def main():
    import torch  # noqa: F401 - fail here, clearly, where torch is missing
    ours = start([sys.argv[1], "serve", "--host", "127.0.0.1", "--port", "0"])
    theirs = start([sys.executable, "-c", TORCH_SERVER])
    report = {"torch": torch.__version__, "operations": 0, "mismatches": []}
    try:
        for script in OPS:
            got = run_ops(script, ours[1], ours[2])
            expected = run_ops(script, theirs[1], theirs[2])
            report[f"outcomes_{os.path.basename(script)[:-3]}"] = got  # to read what ran
            for key in sorted(set(got) | set(expected)):
                report["operations"] += 1
                if got.get(key) != expected.get(key):
                    report["mismatches"].append({"script": os.path.basename(script), "key": key,
                                                 "ddp_store": got.get(key),
                                                 "torch_server": expected.get(key)})
    finally:
        for proc, _, _ in (ours, theirs):
            proc.terminate()
            proc.communicate(timeout=10)
    print(json.dumps(report, sort_keys=True))
    sys.exit(1 if report["mismatches"] else 0)


if __name__ == "__main__":
    main()
