# libddp core sources (init, context): target_sources(ddp PRIVATE ...) and links.
target_sources(ddp PRIVATE src/launcher_env.cpp)
target_link_libraries(ddp PUBLIC ddp_common)
