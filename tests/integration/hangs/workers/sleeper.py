"""Sleeps inside sleep_inside_named_function() for DIR/seconds (default 1000) and exits 0; writes
DIR/ready_rank<R> (its pid) first. Any Python 3."""
import os
import sys
import time

OUT = sys.argv[1]
RANK = os.environ["RANK"]


def sleep_inside_named_function(seconds):
    time.sleep(seconds)


with open(os.path.join(OUT, f"ready_rank{RANK}"), "w") as f:
    f.write(str(os.getpid()))
sleep_inside_named_function(float(sys.argv[2]) if len(sys.argv) > 2 else 1000)
