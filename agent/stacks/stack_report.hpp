#pragma once
// Stack reports: every rank's stack (Python frames or a native backtrace), with identical stacks
// merged ("ranks 0,2-7: ..."), as ddprun prints them on SIGQUIT, on a detected hang and in
// ddprun-stacks. Pure: formatting only.

#include <sys/types.h>

#include <string>
#include <vector>

namespace ddp::agent {

struct RankStack {
  int rank = 0;
  int local_rank = 0;
  pid_t pid = 0;
  std::string host;
  std::string kind = "none";  // "python", "native", or "none" (text then says why there is none)
  std::string text;           // the dump as the tool wrote it
};

// The dump with what differs between processes that stand in the same place removed: thread
// ids and addresses (0x...), eu-stack's "PID n - process" line, "TID n:" and gdb's "(LWP n)".
// Two ranks whose normalized stacks are equal are merged in a report.
std::string normalize_stack(const std::string& text);

// "0,2-7" for {0,2,3,4,5,6,7}; `ranks` in any order, duplicates ignored.
std::string format_rank_ranges(std::vector<int> ranks);

// The report: a header line `title`, any `preface` lines (a hang's verdict), then one section
// per distinct normalized stack, ordered by lowest rank: "rank 1 (python, pid P, host H):" or
// "ranks 0,2-7 (python):", with the stack indented.
std::string format_stack_report(const std::string& title, const std::vector<std::string>& preface,
                                const std::vector<RankStack>& stacks);

}  // namespace ddp::agent
