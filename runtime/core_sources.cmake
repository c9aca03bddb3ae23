# libddp core sources (init, backend choice, launcher env): target_sources(ddp PRIVATE ...) and links.
target_sources(ddp PRIVATE
  src/launcher_env.cpp    # RANK, WORLD_SIZE, ... readers naming the variable on error
  src/backend_choice.cpp  # DDP_BACKEND, else nccl with a visible GPU, else gloo
  src/local_address.cpp   # the address peers reach this rank at (route toward MASTER_ADDR)
  src/store_dialect.cpp   # DDP_STORE_DIALECT
  src/progress_group.cpp  # publishes collective progress for ddprun's hang detector
  src/hosted_store.cpp    # rank 0 hosts the store when the launcher does not (torchrun c10d)
  src/reform_client_linux.cpp  # the worker's end of ddprun's hand-over channel
  src/init.cpp)           # ddp::init, ddp::init_at
if(DDP_WITH_CUDA)
  target_sources(ddp PRIVATE src/cuda_devices.cpp)
  target_link_libraries(ddp PRIVATE CUDA::cudart)
  target_compile_definitions(ddp PRIVATE DDP_WITH_CUDA=1)
else()
  target_sources(ddp PRIVATE src/cuda_devices_none.cpp)
endif()
target_link_libraries(ddp PRIVATE ddp_collectives ddp_store_server ddp_store_client Boost::headers)
