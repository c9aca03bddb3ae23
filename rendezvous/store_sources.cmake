# Sources of the store half of ddp_rendezvous: target_sources(ddp_rendezvous PRIVATE ...).
target_sources(ddp_rendezvous PRIVATE
  prefix_store.cpp
  memory_store.cpp
  server_key_table.cpp
  server_leases.cpp          # store leases: expire a holder's lease when its connection closes
  store_lease.cpp            # the lease document and key names (client and server)
  server_session.cpp
  server_output_queue.cpp
  server_connection.cpp
  server_os_linux.cpp
  server_stats.cpp
  tcp_store_server.cpp
  wire/request_parser.cpp)
