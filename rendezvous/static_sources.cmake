# Static rendezvous sources: one node, or --node_rank across nodes (store on node 0).
target_sources(ddp_rendezvous PRIVATE static_rendezvous.cpp
  static_events.cpp)  # the round event key: failures and lost nodes
