# SLURM sources: target_sources(ddp_agent PRIVATE slurm.cpp ...).
