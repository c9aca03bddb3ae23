#pragma once
// ElasticAgent: the supervision loop of one node. Owned by main(); runs on main's io_context
// (single thread); never blocks the loop.
//
//             +-------------------------------------------------------------+
//             v                                                             |
//   [rendezvous] --round--> [start workers] --> race: first failure          |
//        |                                          | rendezvous watch_round |
//      signal -> exit 128+N                         | signal                 |
//                                                   |                        |
//   all exited 0 --> [exit barrier] -- finished --> exit 0                   |
//                        | peer failed -------------------------------------+ (no restart spent)
//   worker failed --> stop others (TERM, grace, KILL) --> a node lost? ------+ (no restart spent)
//                        | every node alive --> report_failure
//                        | restarts remain --> restart (count+1) ------------+
//                        | spent --> failure report, finish(false) --> exit root cause's code
//     --recovery=inprocess: the others keep running (stopped only when restarts are spent); the
//       failed one starts again in the next round, then the hand-over (it joins as a newcomer)
//   round event (peer failed, node lost/waiting) --> stop workers -----------+ (no restart spent)
//     --recovery=inprocess: keep them; next round --> hand over (inprocess_recovery.hpp):
//       all re-formed --> race again with the same workers; else stop, start anew in that round
//   signal S --> forward S to every worker's group, grace, SIGKILL --> exit 128+S
//   hang (--hang_timeout) --> stack report, then as a worker failure (the hung rank)
//   SIGQUIT (any state) --> stack report (StackService); the job keeps running

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include <memory>
#include <set>
#include <string>
#include <string_view>

#include "agent/core/agent_spec.hpp"
#include "agent/core/event_log.hpp"
#include "agent/core/worker_handover.hpp"
#include "agent/core/worker_launcher.hpp"
#include "agent/stacks/hang_peers.hpp"
#include "agent/stacks/stack_service.hpp"
#include "rendezvous/rendezvous.hpp"

namespace ddp::agent {

class ElasticAgent {
 public:
  // Installs the signal handlers (SIGINT, SIGTERM, SIGHUP, spec.signals_to_handle, and SIGQUIT
  // for stack reports) at once, so a signal during the first rendezvous is handled too. The
  // workers start through `launcher` (a ProcessLauncher; tests pass fakes). `rendezvous`,
  // `events`, `launcher` and `handover` must outlive the agent. `handover`: null, with
  // --recovery=inprocess, for a ReformChannel at <run_dir>/reform.sock (tests pass fakes).
  ElasticAgent(boost::asio::io_context& io, AgentSpec spec, rdzv::Rendezvous& rendezvous,
               EventSink& events, WorkerLauncher& launcher, WorkerHandover* handover = nullptr);
  ~ElasticAgent();  // closes the hang detector's store connection before the io_context goes

  // Runs the job to its end and returns ddprun's exit code: 0 when every worker of the last
  // attempt succeeded; the root-cause worker's exit code (128+N for signal N) when restarts ran
  // out; 128+S for a handled signal S. Throws what the rendezvous throws (TimeoutError, IoError,
  // RendezvousClosedError) and IoError when a worker cannot be started.
  boost::asio::awaitable<int> run();

 private:
  boost::asio::awaitable<int> wait_signal();
  boost::asio::awaitable<bool> finish_success();  // finish(true) as a value, for abandonable()
  // Forwards `signal` to the workers, grace, SIGKILL; emits the events; returns 128+signal.
  boost::asio::awaitable<int> stop_on_signal(AttemptWorkers& group, int signal,
                                             std::size_t& emitted);
  // A handled `signal` when no worker is left to forward it to: logs "received <signal> <why>"
  // unless `why` is empty, emits finish; returns 128+signal.
  int exit_on_signal(int signal, std::string_view why);
  // Starts a new process per spec for round `info` (their filtered logs in `attempt_dir`); emits
  // workers_started.
  std::unique_ptr<AttemptWorkers> launch_workers(const rdzv::RendezvousInfo& info,
                                                 const std::vector<WorkerSpec>& specs,
                                                 const std::string& attempt_dir);
  // --recovery=inprocess: starts `dead` (local ranks whose workers failed) again in `group` for
  // round `info` while their peers run on; emits worker_replaced for each.
  void replace_workers(AttemptWorkers& group, const rdzv::RendezvousInfo& info,
                       const std::vector<WorkerSpec>& specs, const std::string& attempt_dir,
                       const std::set<int>& dead);

  boost::asio::io_context& io_;
  const AgentSpec spec_;
  rdzv::Rendezvous& rendezvous_;
  EventSink& events_;
  WorkerLauncher& launcher_;
  WorkerHandover* handover_;  // a test's, or null
  boost::asio::signal_set signals_;
  std::string host_;
  StackService stacks_;
  std::shared_ptr<HangPeers> hang_peers_;  // this round's (multi-node --hang_timeout), or null
};

// This machine's host name (reports, "[host:rank]" prefixes), or $DDPRUN_NODE_NAME when set.
std::string local_host_name();

}  // namespace ddp::agent
