# WorkerGroup sources (spawning, reaping, output routing): target_sources(ddp_agent PRIVATE ...).
target_sources(ddp_agent PRIVATE
  child_watch_linux.cpp
  line_splitter.cpp
  oom_watch.cpp
  orphan_guard_linux.cpp
  orphan_watchdog_linux.cpp
  output_fds_linux.cpp
  output_router.cpp
  process_spawner_linux.cpp
  worker_group.cpp)
