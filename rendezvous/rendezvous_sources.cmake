# Sources of the rendezvous protocols (issues 3 and 4): target_sources(ddp_rendezvous PRIVATE ...).
