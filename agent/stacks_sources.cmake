# Stacks on demand and hang detection: target_sources(ddp_agent PRIVATE ...) (docs/agent.md).
target_sources(ddp_agent PRIVATE
  hang_detector.cpp          # the hang rule and the sampling loop (--hang_timeout)
  hang_peers.cpp             # long waits shared between the nodes' detectors, in the store
  stack_collector_linux.cpp  # Python dumps by signal, native ones by eu-stack or gdb
  stack_exchange.cpp         # the store protocol of multi-node requests and ddprun-stacks
  stack_hook.cpp             # the workers' sitecustomize and environment
  stack_report.cpp           # merging identical stacks, the report's layout
  stack_service.cpp)         # SIGQUIT, answering other agents, writing and recording reports
