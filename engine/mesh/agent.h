// agent.h — one per node. Registers with the controller, heartbeats, spawns one worker process per
// device and supervises it (a worker's exit is reported the moment SIGCHLD arrives), relays step
// messages between the controller and its workers (the job, plans with each worker's rank, steps,
// checkpoint saves, and their answers), and obeys stop / drain / kill. Workers die with
// their agent (PR_SET_PDEATHSIG), so killing an agent is a node loss. If the controller declares
// the node dead (e.g. after a freeze or a partition), the agent registers again and gets a new
// node id; a controller that restarted from its journal gives it its old id back. Cut off from the
// controller for its liveness window, the agent fences itself (its workers abandon the step in
// flight); after mesh.controller_grace_ms it stops its workers and exits. With
// AgentOptions::cpu_share each worker runs in a CPU cgroup of its own (cpu_share.h). The node
// holds other workers' sparse snapshots in its memory at its slice endpoint (slice_server.h). A
// worker relaunched as a new image of itself (runtime/relaunch.h) says hello again under its pid:
// it gets the job again, and the newest plan relayed to it if that is newer than the one it carries.
// A worker that crashes after it was ready (killed, or unresponsive and killed by the agent) is
// replaced by a new one on the same device, after a pause that doubles each time, up to the job's
// mesh.worker_restarts per device in a row (one that ran ten minutes resets the count): the new worker has a new index (device slot + k x devices), so
// the job sees a worker leave and, later, a new one join — it holds nothing of the old one's state.
#pragma once

#include <uv.h>
#include <zmq.hpp>

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/ids.h"
#include "core/log.h"
#include "core/result.h"
#include "mesh/cpu_share.h"
#include "mesh/process.h"
#include "mesh/security.h"
#include "mesh/slice_server.h"
#include "mesh/timer.h"
#include "wire/codec.h"

namespace sal::mesh {

class ZmqWatcher;

struct AgentOptions {
  std::string controller;                 // the controller's mesh endpoint
  std::vector<std::string> devices;       // one worker each: "cpu:0", "cuda:1", ...
  std::string name;                       // default: host:pid
  pid_t parent_pid = 0;                   // die with this process (`salamander run` sets it)
  std::string log_level = "info";
  std::string log_format = "plain";
  int64_t controller_timeout_ms = 30000;  // exit after this long without the controller (the job's
                                          // mesh.controller_grace_ms replaces it once welcomed)
  std::string server_public_key;          // CURVE: the controller's public key (Z85)
  std::string key_file;                   // CURVE: our key pair
  std::string data_host;                  // our workers' data-plane address (default: see start())
  double cpu_share = 0;                   // > 0: each worker in a CPU cgroup of this many CPUs (cpu_share.h)
};

class Agent {
 public:
  Agent(uv_loop_t* loop, zmq::context_t& ctx, AgentOptions opts);
  ~Agent();

  Status start();
  // Stops the workers and leaves (SIGTERM/SIGINT of a standalone agent).
  void stop(const std::string& reason);
  // Called once the agent has finished (stopped, drained, or gave up): the process exit code.
  std::function<void(int)> on_exit;

 private:
  enum class Phase { registering, running, draining, stopping, done };
  struct Worker {
    uint32_t index = 0;
    uint32_t slot = 0;  // its device's position in AgentOptions::devices (index % devices)
    std::string device;
    std::unique_ptr<ChildProcess> proc;
    std::string rid;  // its identity on our worker socket, once it said hello
    wire::WorkerState state = wire::WorkerState::starting;
    bool was_ready = false;  // it reported ready once: a crash after that is restarted
    int64_t ready_ns = 0;    // when it first did
    bool exited = false;
    std::string last_error;
    int64_t last_seen_ns = 0;  // its last message (workers report status every heartbeat)
    uint64_t cpu_ticks = 0;    // its process's CPU time (clock ticks), as last looked at
    int64_t cpu_grew_ns = 0;   // when a look last found that time grown (0: never)
    bool said_busy = false;    // its silence while busy was said (once a silence)
    wire::Holding held;        // what its state has seen (reported with its status)
    std::optional<wire::PlanUpdate> last_plan;  // the newest plan relayed to it (for a relaunched image)
  };

  void on_controller_message();
  void on_worker_message();
  void refuse_local(const char* kind, const std::string& why);
  void handle_welcome(const wire::Welcome& w);
  void handle_command(const wire::Command& c);
  void send_register();
  void send_heartbeat();
  void open_cpu_shares();
  void spawn_workers();
  void start_worker(Worker& w);
  void on_worker_exit(Worker& w, int64_t code, int sig);
  // A crashed worker's device gets a new worker after a pause, while restarts are left (header).
  void schedule_restart(const Worker& w, const std::string& how);
  void restart_due();
  void report(const Worker& w, wire::WorkerEventKind kind, int code = 0, int sig = 0,
              const std::string& detail = "");
  void stop_workers(wire::Verb verb, const std::string& reason);
  void maybe_finish();
  void finish(int code, const std::string& reason);
  void check_silence();
  void check_workers();
  // A silent worker whose process still runs (runnable, in the kernel, or its CPU time grown within
  // the liveness window: mesh/process.h busy_process) is busy, not dead: it gets kBusyWindows
  // windows; a stopped, hung or zombie one is killed at once. look_at_cpu samples its CPU time at
  // every check and hands the sample on to busy().
  Result<ProcessSample> look_at_cpu(Worker& w, int64_t now);
  bool busy(Worker& w, const Result<ProcessSample>& sample, int64_t silent_ns, int64_t limit_ns, int64_t now);
  template <class M>
  void to_controller(const M& msg);
  template <class M>
  void to_worker(const Worker& w, const M& msg);
  template <class M>
  void relay_up(const wire::Envelope& env, const Worker& w);
  void relay_plan(wire::PlanUpdate plan);

  uv_loop_t* loop_;
  zmq::context_t& ctx_;
  AgentOptions opts_;
  zmq::socket_t ctrl_;
  zmq::socket_t local_;
  std::string local_endpoint_;
  std::unique_ptr<ZmqWatcher> ctrl_watcher_;
  std::unique_ptr<ZmqWatcher> local_watcher_;
  std::unique_ptr<SliceServer> slices_;  // other workers' sparse snapshots held here (slice_server.h)
  std::deque<Worker> workers_;  // a deque: a worker's exit callback holds a reference to it
  struct Restart {
    uint32_t slot;
    uint32_t replaces;  // the crashed worker's index
    int64_t due_ns;
    std::string why;
  };
  std::vector<Restart> restarts_due_;
  std::vector<uint32_t> restarts_done_;  // per device slot
  uint32_t restart_limit_ = 0;           // mesh.worker_restarts (from Welcome)
  std::optional<wire::JobSpec> job_;  // what our workers train (from the controller, after Welcome)
  std::optional<CpuShares> shares_;   // --cpu-share: the workers' CPU cgroups
  Phase phase_ = Phase::registering;
  NodeId node_id_ = kNoNode;
  uint32_t heartbeat_ms_ = 100;
  uint32_t miss_limit_ = 3;
  uint64_t hb_seq_ = 0;
  NodeId previous_id_ = kNoNode;  // our id before the controller forgot us (it may give it back)
  bool fenced_ = false;           // cut off from the controller: our workers' step was abandoned
  int64_t last_contact_ns_ = 0;
  int64_t last_check_ns_ = 0;  // the previous check_workers(): a long gap means this agent was stopped
  int64_t last_silence_check_ns_ = 0;  // the previous check_silence(): likewise, for the controller's silence
  std::string stop_reason_;
  int exit_code_ = 0;
  Timer heartbeat_timer_;
  Timer register_timer_;
  Timer silence_timer_;
  Timer kill_timer_;
  KindLog bad_local_log_;  // bad input on the worker endpoint, logged once per kind
};

}  // namespace sal::mesh
