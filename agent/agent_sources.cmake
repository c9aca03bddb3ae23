# The agent: rendezvous factory, supervision loop, failure reports, event log.
target_sources(ddp_agent PRIVATE
  agent_metrics.cpp
  elastic_agent.cpp
  event_log.cpp
  failure_report.cpp
  rendezvous_factory.cpp
  write_failure.cpp)
target_link_libraries(ddp_agent PRIVATE nlohmann_json::nlohmann_json)
target_link_libraries(ddp_agent PUBLIC ddp_store_metrics)  # --metrics_port
