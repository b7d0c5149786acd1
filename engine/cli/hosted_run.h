// hosted_run.h — `salamander run` with its controller in a child process: what a drill that kills
// the controller (kill{controller = true}) needs, since a process cannot SIGKILL itself and go on.
// This process is the host: it starts `salamander controller` (with the job, the drill and a pipe
// to ask the host for things: cli/host_link.h) and the job's agents, which connect to the mesh
// endpoint the host chose, and it stays out of the job otherwise — the controller's progress line,
// summary, summary.json and report.html are the child's, on this terminal. When the drill asks, the
// host SIGKILLs the controller, waits, and starts `salamander controller --resume RUN_DIR`; the
// agents ride out the absence (mesh.controller_grace_ms) and the resumed controller goes on with
// the job and with the drill (its progress is in the journal). A controller that dies of a signal
// on its own (a crash, kill -9) is brought back the same way, half a second later. A drill's `add` starts agents here.
// Ctrl-C and SIGTERM are passed on to the controller (it is in a session of its own, so a terminal
// signal reaches it once); the run's exit code is the last controller's.
//
// For a drill that cuts links (partition{}), the run builds a network of namespaces
// (drill/netns_lab.h): the controller in the hub's, each agent in one of its own behind a veth pair,
// the mesh on 10.78.0.1 with CURVE (keys made for the run in RUN_DIR/keys) since it is no longer
// loopback. "cut NODE MS" takes the agent's link down and brings it back MS later. The REPL and the
// metrics endpoint then live inside the hub's namespace (the run prints how to reach them).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/common.h"
#include "cli/host_link.h"
#include "cli/local_run.h"
#include "mesh/cpu_share.h"
#include "drill/netns_lab.h"
#include "mesh/process.h"
#include "mesh/timer.h"

namespace sal::cli {

struct HostedRunOptions {
  LocalRunOptions run;                      // the job (mesh.nodes, devices), steps, run directory, logs
  std::vector<std::string> controller_args;  // what picks the job and drill: [JOB] --set --drill --drill-arg --repl --metrics
  bool netns = false;                        // the mesh in network namespaces (a drill with partition{})
};

class HostedRun {
 public:
  HostedRun(EventLoop& loop, HostedRunOptions opts);
  ~HostedRun();

  Status start();
  int exit_code() const { return exit_code_; }
  bool interrupted() const { return interrupted_; }

 private:
  Status spawn_controller(bool resume);
  void spawn_agent();
  Status build_lab();
  Status cut(const std::string& node, int64_t ms);
  void on_request(Result<HostRequest> r);
  void on_controller_exit(int64_t code, int sig);
  void restart_after(int64_t ms, const std::string& what);
  void on_agent_exit(size_t i, int64_t code, int sig);
  void on_signal(int sig);
  void finish(int code);
  void maybe_done();
  void kill_agents();

  EventLoop& loop_;
  HostedRunOptions opts_;
  std::string endpoint_;
  int link_read_ = -1, link_write_ = -1;  // the pipe the controller asks on (the listener owns the read end)
  HostListener listener_;
  std::unique_ptr<mesh::ChildProcess> controller_;
  std::vector<std::unique_ptr<mesh::ChildProcess>> agents_;
  std::optional<mesh::CpuShares> shares_;
  std::unique_ptr<drill::NetLab> lab_;     // --netns: the namespaces (removed after the processes are killed)
  std::vector<std::string> secure_args_;  // the controller's --server-key and --allow in the lab
  std::vector<std::string> agent_keys_;   // the agents' --server-key and --key
  std::map<int, std::unique_ptr<mesh::Timer>> heals_;  // a cut link's restoration, by node
  mesh::Timer restart_timer_;
  mesh::Timer reap_timer_;
  mesh::Timer orphan_timer_;  // every agent gone: the controller gets a while to end the job itself
  std::optional<int64_t> restart_ms_;  // a restart asked for: the controller's death is expected
  int64_t controller_started_ns_ = 0;
  int quick_deaths_ = 0;               // deaths in a row soon after a start
  int exit_code_ = 0;
  bool interrupted_ = false;
  bool finishing_ = false;
};

// "tcp://127.0.0.1:*" with the port chosen now (a free one), so agents started before the
// controller binds know where to connect; any other endpoint as it is.
Result<std::string> fixed_endpoint(const std::string& bind);

}  // namespace sal::cli
