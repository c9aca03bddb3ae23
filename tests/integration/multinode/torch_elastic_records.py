"""Reading what torch_elastic_worker.py writes (its start records and epoch barriers), for the
elastic tests and scripts/bench/node_loss_bench.py. Stdlib only."""

import glob
import json
import os


def starts(out_dir, world, after=0.0):
    """Start records of workers at `world` that passed init_process_group after `after`."""
    found = []
    for path in glob.glob(os.path.join(out_dir, f"start_w{world}_*.json")):
        with open(path) as f:
            doc = json.load(f)
        if doc["init_time"] > after:
            found.append(doc)
    return found


def latest_barrier(out_dir, world, after, min_epoch=1):
    """Time of rank 0's latest epoch barrier at `world` (epoch >= min_epoch) later than `after`,
    or None."""
    times = []
    for path in glob.glob(os.path.join(out_dir, f"barrier_w{world}_e*")):
        if int(path.rsplit("_e", 1)[1]) < min_epoch:
            continue
        with open(path) as f:
            text = f.read().strip()
        if text and float(text) > after:
            times.append(float(text))
    return max(times) if times else None
