# libddp training sources (sampler, reducer, checkpoint): target_sources(ddp PRIVATE ...).
