#pragma once
// ProgressGroup: a ProcessGroup decorator that publishes the worker's collective progress
// (ProgressRecord: sequence number, op, since when) for its agent's hang detector. init() wraps
// the default group in it when the launcher set DDPRUN_PROGRESS_FILE.

#include <memory>

#include "common/progress_record.hpp"
#include "ddp/process_group.hpp"

namespace ddp::runtime {

// Wraps `inner`: every collective counts as issued when called and as completed when its Work's
// wait() returns or is_completed() first answers true. Sub-groups (new_group) are returned
// unwrapped: their collectives involve some ranks only, and would skew the sequence numbers.
std::shared_ptr<ProcessGroup> with_progress(std::shared_ptr<ProcessGroup> inner,
                                            std::shared_ptr<ProgressWriter> writer);

}  // namespace ddp::runtime
