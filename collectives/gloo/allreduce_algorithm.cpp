// Parsing and naming of the all_reduce algorithm setting.
#include "collectives/gloo/allreduce_algorithm.hpp"

#include <fmt/format.h>

#include "ddp/error.hpp"

namespace ddp::coll {

AllreduceAlgorithm parse_allreduce_algorithm(const std::string& text, const std::string& origin) {
  if (text == "auto") return AllreduceAlgorithm::kAuto;
  if (text == "ring") return AllreduceAlgorithm::kRing;
  if (text == "bcube") return AllreduceAlgorithm::kBcube;
  if (text == "shm") return AllreduceAlgorithm::kShm;
  throw ConfigError(
      fmt::format("{}='{}' is not an all_reduce algorithm (auto, ring, bcube, shm)", origin, text));
}

std::string to_string(AllreduceAlgorithm algorithm) {
  switch (algorithm) {
    case AllreduceAlgorithm::kAuto:
      return "auto";
    case AllreduceAlgorithm::kRing:
      return "ring";
    case AllreduceAlgorithm::kBcube:
      return "bcube";
    case AllreduceAlgorithm::kShm:
      return "shm";
    case AllreduceAlgorithm::kHierarchical:
      return "hierarchical";
  }
  return "?";
}

}  // namespace ddp::coll
