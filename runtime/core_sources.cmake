# libddp core sources (init, context): target_sources(ddp PRIVATE ...) and links.
