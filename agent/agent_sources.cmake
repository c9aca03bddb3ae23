# The agent: rendezvous factory, supervision loop, failure reports, event log.
target_sources(ddp_agent PRIVATE
  elastic_agent.cpp
  event_log.cpp
  failure_report.cpp
  rendezvous_factory.cpp)
target_link_libraries(ddp_agent PRIVATE nlohmann_json::nlohmann_json)
