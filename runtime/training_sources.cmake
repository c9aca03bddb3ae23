# libddp training sources (sampler, reducer, checkpoint): target_sources(ddp PRIVATE ...).
target_sources(ddp PRIVATE
  src/training/sampler.cpp
  src/training/reducer.cpp
  src/training/checkpoint.cpp
  src/training/state_sync.cpp)  # in-process recovery: every rank to the most-committed state
target_link_libraries(ddp PRIVATE nlohmann_json::nlohmann_json)
