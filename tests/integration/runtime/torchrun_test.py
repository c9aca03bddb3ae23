"""libddp under PyTorch 1.13's own launcher: runtime_worker joins through torchrun's agent store
(the 1.13 wire dialect, libddp's default) and runs every op on 2 ranks.

Debian's torchrun needs --redirects/--tee other than 0 on Python 3.11 (docs/testing.md)."""

import ddptest

ddptest.require_torch()
cmd = [ddptest.TORCH_PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
       "--monitor_interval=0.1", "--redirects", "1", "--tee", "1", "--no_python",
       ddptest.bin_path("runtime_worker"), "ops", "1", "1001"]
result = ddptest.run(cmd, timeout=100)
out = result.stdout + result.stderr
ddptest.check(result.returncode == 0, f"torchrun exited {result.returncode}:\n{out}")
ddptest.check(out.count("OK ops") == 2, f"not both ranks printed OK:\n{out}")
print("PASS libddp under torchrun 1.13")
