// Stack reports: normalization, rank ranges, merging identical stacks.
#include <catch2/catch.hpp>

#include "agent/stacks/stack_report.hpp"

using namespace ddp::agent;

namespace {

RankStack python(int rank, const std::string& thread_id, const std::string& function) {
  RankStack s;
  s.rank = rank;
  s.local_rank = rank;
  s.pid = 1000 + rank;
  s.host = "node0";
  s.kind = "python";
  s.text = "Current thread " + thread_id +
           " (most recent call first):\n  File \"t.py\", line 3 in " + function + "\n\n";
  return s;
}

}  // namespace

TEST_CASE("rank ranges collapse consecutive ranks", "[stacks]") {
  CHECK(format_rank_ranges({0, 2, 3, 4, 5, 6, 7}) == "0,2-7");
  CHECK(format_rank_ranges({5, 1, 1, 0}) == "0-1,5");
  CHECK(format_rank_ranges({3}) == "3");
  CHECK(format_rank_ranges({}) == "");
}

TEST_CASE("normalization drops thread ids, pids and addresses", "[stacks]") {
  CHECK(normalize_stack("Thread 0x00007f12ab (most recent call first):\n") ==
        "Thread (most recent call first):\n");
  CHECK(normalize_stack("PID 4711 - process\nTID 4711:\n#0  0x00007f6b8fa2b0d3 nanosleep\n#1  "
                        "0x0000000000401000\n") == "thread:\n#0  nanosleep\n#1  ??\n");
  CHECK(normalize_stack("Thread 2 (Thread 0x7f (LWP 99) \"w\"):\n") ==
        "Thread 2 (Thread \"w\"):\n");
}

TEST_CASE("identical stacks are merged and different ones kept apart", "[stacks]") {
  std::vector<RankStack> stacks;
  for (int rank : {0, 2, 3, 4, 5, 6, 7}) {
    stacks.push_back(python(rank, "0x7f00" + std::to_string(rank), "wait_in_all_reduce"));
  }
  stacks.push_back(python(1, "0x7f0099", "sleep_in_named_function"));
  const std::string report = format_stack_report("title", {"preface line"}, stacks);
  CHECK(report.find("title\npreface line\n") != std::string::npos);
  CHECK(report.find("ranks 0,2-7 (python):\n") != std::string::npos);
  CHECK(report.find("rank 1 (python, pid 1001, host node0):\n") != std::string::npos);
  CHECK(report.find("line 3 in wait_in_all_reduce") != std::string::npos);
  CHECK(report.find("line 3 in sleep_in_named_function") != std::string::npos);
  // Sections in order of their lowest rank: 0,2-7 before 1.
  CHECK(report.find("ranks 0,2-7") < report.find("rank 1 ("));
}

TEST_CASE("the same text from a native and a python rank is not merged", "[stacks]") {
  auto a = python(0, "0x1", "f");
  auto b = python(1, "0x2", "f");
  b.kind = "native";
  const std::string report = format_stack_report("t", {}, {a, b});
  CHECK(report.find("rank 0 (python") != std::string::npos);
  CHECK(report.find("rank 1 (native") != std::string::npos);
}
