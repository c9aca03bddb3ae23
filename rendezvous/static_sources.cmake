# Static rendezvous sources: target_sources(ddp_rendezvous PRIVATE ...).
