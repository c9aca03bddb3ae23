# Client half of the store (TcpStoreClient, BlockingStore, client codec): target_sources(ddp_rendezvous PRIVATE ...).
target_sources(ddp_rendezvous PRIVATE
  wire/client_codec.cpp      # request encoding, incremental reply decoding (sans-IO)
  store_connection.cpp       # connect with backoff, handshake, deadline-bounded I/O
  tcp_store_client.cpp       # the Store operations over a StoreConnection
  blocking_store.cpp)        # synchronous facade on a private io_context
