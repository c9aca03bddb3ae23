# ddp_agent sources: target_sources(ddp_agent PRIVATE ...) and extra links.
