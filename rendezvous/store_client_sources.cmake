# Client half of the store (TcpStoreClient, BlockingStore, client codec): target_sources(ddp_rendezvous PRIVATE ...).
