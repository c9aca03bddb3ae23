"""Starting the servers the store tests talk to: `ddp-store serve` and PyTorch 1.13's own TCPStore
server (a /usr/bin/python3 process holding TCPStore(is_master=True)). Both print their port."""

import os
import re
import signal
import subprocess

import ddptest

TORCH_SERVER = r"""
import datetime, sys, time
from torch.distributed import TCPStore
store = TCPStore("127.0.0.1", 0, None, True, datetime.timedelta(seconds=60))
print("listening on 127.0.0.1:%d" % store.port, flush=True)
sys.stdin.read()   # until the test closes our stdin
"""


class Server:
    """A running store server; use as a context manager so it is always stopped."""

    def __init__(self, cmd, stdin=None):
        self.proc = ddptest.spawn(cmd, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)
        line = self.proc.stdout.readline()
        match = re.fullmatch(r"listening on (\S+):(\d+)\n", line)
        if not match:
            self.stop()
            ddptest.fail(f"{cmd[0]} printed {line!r} instead of 'listening on H:P'; "
                         f"stderr: {self.proc.stderr.read()}")
        self.host, self.port = match.group(1), int(match.group(2))

    def stop(self, sig=signal.SIGTERM, timeout=10):
        """Stops the server; returns (exit code, stderr)."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
        try:
            _, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            _, err = self.proc.communicate()
            ddptest.fail(f"server did not stop within {timeout}s of signal {sig}")
        return self.proc.returncode, err

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.communicate()


def ddp_store(host="127.0.0.1", port=0, extra=()):
    return Server([ddptest.bin_path("ddp-store"), "serve", "--host", host, "--port", str(port),
                   *extra])


def torch_store():
    return Server([ddptest.TORCH_PYTHON, "-c", TORCH_SERVER], stdin=subprocess.PIPE)
