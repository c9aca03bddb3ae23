"""A ddprun worker that writes its rank into the job's store with PyTorch 1.13's TCPStore client
(MASTER_ADDR:MASTER_PORT, the store the agent hosts), writes DIR/ready_rank<R>, and sleeps until
the agent stops it. Run by /usr/bin/python3."""

import datetime
import os
import sys
import time

from torch.distributed import TCPStore

rank = int(os.environ["RANK"])
store = TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), None, False,
                 datetime.timedelta(seconds=60))
store.set(f"metrics_worker/rank{rank}", b"y" * 4096)
store.get(f"metrics_worker/rank{rank}")
with open(os.path.join(sys.argv[1], f"ready_rank{rank}"), "w") as f:
    f.write("ready")
time.sleep(120)
