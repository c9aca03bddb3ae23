"""Sleeps inside sleep_inside_named_function() for DIR/seconds (default 1000) and exits 0; writes
DIR/ready_rank<R> (its pid) first. Any Python 3."""
import os
import sys
import time

OUT = sys.argv[1]
RANK = os.environ["RANK"]


def sleep_inside_named_function(seconds):
    time.sleep(seconds)


# Written whole, then renamed: a test that sees the mark reads the full pid.
ready = os.path.join(OUT, f"ready_rank{RANK}")
partial = os.path.join(OUT, f".ready_rank{RANK}.partial")
with open(partial, "w") as f:
    f.write(str(os.getpid()))
os.replace(partial, ready)
sleep_inside_named_function(float(sys.argv[2]) if len(sys.argv) > 2 else 1000)
