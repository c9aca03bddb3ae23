#pragma once
// The all_reduce algorithm setting (DDP_ALLREDUCE_ALGORITHM): its values, parsing and names.

#include <string>

namespace ddp::coll {

// kAuto: kShm when every rank of the group is on this host (one shared_memory_domain()); else
// kHierarchical when some host has several ranks; else kRing. kShm demands shared memory (for
// every collective, not only all_reduce); kRing and kBcube are Gloo's all_reduce algorithms over
// TCP, and with them every collective goes through Gloo. kHierarchical (chosen by kAuto only)
// reduces within each host through shared memory, runs Gloo's ring among one leader per host (the
// host's lowest rank) and broadcasts the result within each host; the other collectives go
// through Gloo over all ranks.
enum class AllreduceAlgorithm { kAuto, kRing, kBcube, kShm, kHierarchical };

// "auto" / "ring" / "bcube" / "shm"; throws ConfigError naming `origin` (a flag or variable) for
// anything else ("hierarchical" is auto's choice, not a setting).
AllreduceAlgorithm parse_allreduce_algorithm(const std::string& text, const std::string& origin);
std::string to_string(AllreduceAlgorithm algorithm);

}  // namespace ddp::coll
