# --hostfile fan-out: the hostfile format, each host's command, the ssh supervisor, and the remote
# agent's signals-on-stdin.
target_sources(ddp_agent PRIVATE
  fanout.cpp
  fanout_plan.cpp
  fanout_supervisor_linux.cpp
  hostfile.cpp
  stdin_signals_linux.cpp)
