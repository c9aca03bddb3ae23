# etcd backend sources: target_sources(ddp_rendezvous_etcd PRIVATE ...).
target_sources(ddp_rendezvous_etcd PRIVATE
  etcd_json.cpp            # gateway JSON documents, base64 (sans-IO)
  etcd_http.cpp            # HTTP/1.1 request bytes, response reader, JSON stream splitter
  etcd_tls.cpp             # TLS context from cacert/cert/key, TLS error texts
  etcd_connect.cpp         # one connection to one member, plain or TLS
  etcd_client.cpp          # unary calls with member failover
  etcd_watch.cpp           # streamed watches that resume on another member
  etcd_documents.cpp       # node descriptor and round header
  etcd_lease.cpp           # the node's lease and keep-alives
  etcd_rendezvous.cpp      # joining and closing rounds
  etcd_monitor.cpp         # the running round: watch, failures, exit barrier, leaving
  etcd_backend.cpp)        # client, worker store and lease ownership
