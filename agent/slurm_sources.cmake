# SLURM auto-detection (slurm.cpp) and the hostlist expression parser (hostlist.cpp).
target_sources(ddp_agent PRIVATE slurm.cpp hostlist.cpp)
