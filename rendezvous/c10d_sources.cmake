# c10d rendezvous sources: target_sources(ddp_rendezvous PRIVATE ...).
target_sources(ddp_rendezvous PRIVATE
  c10d_assignment.cpp      # rank order, header and places of a round
  c10d_assignment_json.cpp # their JSON documents
  c10d_change_log.cpp      # the running round's event log
  c10d_rendezvous.cpp      # joining and closing rounds, failures, job close
  c10d_monitor.cpp         # heartbeats, neighbour watch, watch_round, exit barrier
  c10d_backend.cpp         # hosting decision, store server/client ownership
  lease_holder.cpp         # holds a node's store lease on a connection of its own
  net_address_linux.cpp)   # advertised address (route to the endpoint), local-host test
