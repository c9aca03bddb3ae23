# WorkerGroup sources (spawning, reaping, output routing): target_sources(ddp_agent PRIVATE ...).
