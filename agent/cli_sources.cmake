# CLI sources: LaunchConfig parsing, worker specs, log dirs, --dry_run.
target_sources(ddp_agent PRIVATE
  cli_args.cpp
  dry_run.cpp
  endpoint.cpp
  launch_config.cpp
  log_dirs.cpp
  nproc.cpp
  numa_binding.cpp
  numa_binding_linux.cpp
  program_search_linux.cpp
  rdzv_conf.cpp
  run_id_hash.cpp
  signal_names.cpp
  std_streams.cpp
  uuid4.cpp
  worker_spec.cpp)
