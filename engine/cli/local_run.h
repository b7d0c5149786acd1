// local_run.h — what `salamander run` does: a controller in this process and N agents as child
// processes on loopback, a live progress line, and a clean shutdown (job done, job.stop(), Ctrl-C
// or SIGTERM): the controller stops the agents, the agents stop their workers, and nothing is left
// running. A second Ctrl-C kills the agents at once. Agents and workers die with this process
// even if it is SIGKILLed (PR_SET_PDEATHSIG).
//
// A drill (drill/runner.h) given up front, or started from the REPL (drill.start), runs on the
// controller's loop; its `add` starts more agents here. At the end the run writes summary.json
// (the --json object) and report.html into the run directory. With cpu_share the agents confine
// their workers to CPU cgroups (a benchmark's fair measurement); the run removes the groups its
// agents left behind when it ends.
#pragma once

#include <zmq.hpp>

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/common.h"
#include "cli/progress.h"
#include "cli/run_summary.h"
#include "drill/runner.h"
#include "job/config.h"
#include "mesh/controller.h"
#include "mesh/cpu_share.h"
#include "mesh/process.h"
#include "mesh/timer.h"
#include "sim/jobs.h"

namespace sal::cli {

struct LocalRunOptions {
  job::JobConfig job;
  int64_t steps = 0;
  std::string run_dir;
  bool json = false;
  std::string log_level = "info";
  std::string log_format = "plain";
  std::optional<drill::DrillSpec> drill;
  double cpu_share = 0;  // > 0: every worker in a CPU cgroup of this many CPUs (mesh/cpu_share.h)
  std::optional<job::ResumeFrom> resume_from;  // --resume: start from this checkpoint
};

// A local agent's command line: node `index` of the job's devices joining `endpoint`, logging to
// <run>/agent-<index>.log, dying with this process; with `confined`, its workers in CPU cgroups.
mesh::SpawnOptions local_agent(const LocalRunOptions& o, const std::string& endpoint, size_t index, bool confined);
// --cpu-share: checked once, so the terminal says whether the workers will be confined (null: off,
// or unavailable here).
std::optional<mesh::CpuShares> open_cpu_shares(double share);
// The groups the agents left behind, once their workers are gone.
void close_cpu_shares(const std::optional<mesh::CpuShares>& shares);

class LocalRun {
 public:
  LocalRun(EventLoop& loop, zmq::context_t& ctx, LocalRunOptions opts);
  ~LocalRun();

  Status start();
  // The exit code once the loop has returned: 0 done, 1 failed, 130 interrupted.
  int exit_code() const { return exit_code_; }
  // Stopped by SIGINT or SIGTERM (a `--modes` run then runs no further mode).
  bool interrupted() const { return interrupted_; }
  void print_summary();

 private:
  Status spawn_agent(size_t i);
  bool any_agent_running() const;
  Status add_agents(int count);
  Status start_drill(drill::DrillSpec spec);
  RunView view() const;
  void on_agent_exit(size_t i, int64_t code, int sig);
  void on_signal(int sig);
  void begin_stop(const std::string& why, int code);
  void wait_for_agents();
  void kill_agents();
  void refresh(bool force);

  EventLoop& loop_;
  zmq::context_t& ctx_;
  LocalRunOptions opts_;
  sim::SimJobs sim_jobs_;  // the REPL's sim.run jobs: outlives the controller's REPL
  std::unique_ptr<mesh::Controller> controller_;
  std::unique_ptr<drill::DrillRunner> drill_;
  std::vector<drill::ExpectationResult> expectations_;
  std::vector<std::unique_ptr<mesh::ChildProcess>> agents_;
  std::optional<mesh::CpuShares> shares_;  // --cpu-share (null: off, or unavailable here)
  ProgressLine progress_;
  mesh::Timer progress_timer_;
  mesh::Timer reap_timer_;
  int64_t started_ns_ = 0;
  int64_t finished_ns_ = 0;
  std::string stop_reason_;
  int exit_code_ = 0;
  bool interrupted_ = false;
  std::optional<int> interrupt_code_;  // 130 or 143 once a signal asked the job to stop
  bool stopping_ = false;
  bool controller_stopped_ = false;  // every node said goodbye (or the controller's stop grace ran out)
  bool joined_once_ = false;
};

}  // namespace sal::cli
