#pragma once
// Starting and signalling worker processes: a vfork-style clone + exec with the worker in its own
// process group, a parent-death signal, every inherited descriptor closed, and exec failures
// reported back through a CLOEXEC pipe. Everything between clone and exec is async-signal-safe.

#include <sys/types.h>

#include <set>
#include <string>
#include <vector>

#include "common/unique_fd.hpp"

namespace ddp::agent {

// A command ready to exec: the program resolved through PATH and the C arrays execve wants, all
// built before fork so the child allocates nothing.
class ExecImage {
 public:
  // `argv[0]` is a path (contains '/') or a name looked up in the PATH of `env` ("KEY=VALUE"
  // entries; the default path "/bin:/usr/bin" when env has no PATH). Throws IoError naming
  // argv[0] when argv is empty or the name is not an executable file in any PATH directory.
  ExecImage(const std::vector<std::string>& argv, const std::vector<std::string>& env);

  const std::string& program() const { return program_; }  // the resolved path
  const std::string& name() const { return name_; }        // argv[0] as given

 private:
  friend class ForkedChild;
  std::string name_;
  std::string program_;
  std::vector<char*> argv_;  // points into the caller's strings (must outlive the image)
  std::vector<char*> envp_;
};

// Where a child may run, prepared before it starts: the bit masks sched_setaffinity and
// set_mempolicy take (bit c of cpu_mask: CPU c; bit n of node_mask: NUMA node n).
struct CpuPlacement {
  std::vector<unsigned long> cpu_mask;
  std::vector<unsigned long> node_mask;  // empty: no memory policy

  // The masks for `cpus` (not empty) and `memory_node` (< 0: none).
  static CpuPlacement of(const std::set<int>& cpus, int memory_node);
};

// How a child starts, beyond its image.
struct ChildSetup {
  int stdout_fd = -1;            // becomes its fd 1 when >= 0 (else fd 1 is inherited)
  int stderr_fd = -1;            // becomes its fd 2 when >= 0
  int guard_socket = -1;         // >= 0: registers the child's group with the OrphanGuard
  bool dies_with_agent = true;   // PR_SET_PDEATHSIG=SIGKILL
  int pass_fd = -1;              // >= 0: stays open across exec (all others from 3 up close)
  int stdin_fd = -1;             // becomes its fd 0 when >= 0 (else fd 0 is inherited)
  // Non-null: the child binds itself there before exec (a CPU mask it cannot take fails the
  // start with that errno; the memory policy, MPOL_PREFERRED, is best effort).
  const CpuPlacement* placement = nullptr;
};

// One started child (vfork-style: see process_spawner_linux.cpp) whose exec outcome is not yet
// known.
class ForkedChild {
 public:
  // Starts the child; it joins a new process group (its own pid), sets PR_SET_PDEATHSIG=SIGKILL,
  // unblocks every signal, restores SIGPIPE/SIGXFSZ to default, makes `stdout_fd`/`stderr_fd`
  // its fds 1 and 2, closes every other fd but 0 at exec, and execs the image. With
  // `guard_socket` >= 0 the child registers its process group with the OrphanGuard before exec.
  // Throws IoError when the child or the pipe cannot be created.
  ForkedChild(const ExecImage& image, int stdout_fd, int stderr_fd, int guard_socket = -1);
  // The same with every choice spelled out (ChildSetup's defaults: stdio inherited).
  ForkedChild(const ExecImage& image, const ChildSetup& setup);
  ~ForkedChild();
  ForkedChild(const ForkedChild&) = delete;
  ForkedChild& operator=(const ForkedChild&) = delete;

  pid_t pid() const { return pid_; }

  // Blocks until the child has exec'd or failed to; returns 0 on success, else the errno of the
  // failed exec (the child then exits 127 and must still be reaped). Call once.
  int await_exec();

 private:
  pid_t pid_ = -1;
  UniqueFd exec_status_fd_;  // read end of the CLOEXEC pipe
};

// True when `path` is a regular file this process may execute (PATH lookup's test).
bool is_executable_file(const std::string& path);

// Sends `signal` to the process group `pgid`. Returns false when the group no longer exists.
bool signal_process_group(pid_t pgid, int signal);

// Reaps `pid` if it has exited (or, with `block`, once it exits); returns true when reaped.
bool reap_process(pid_t pid, bool block);

// Makes this process a child subreaper (orphaned grandchildren are reparented to it). Throws
// IoError when the kernel refuses.
void make_child_subreaper();

// True once make_child_subreaper() succeeded in this process (not inherited across fork).
bool is_child_subreaper();

}  // namespace ddp::agent
