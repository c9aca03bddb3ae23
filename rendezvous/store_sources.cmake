# Sources of the store half of ddp_rendezvous (issue 2): target_sources(ddp_rendezvous PRIVATE ...).
target_sources(ddp_rendezvous PRIVATE prefix_store.cpp)
