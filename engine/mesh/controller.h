// controller.h — the controller: one per job, on a CPU host. It is the I/O around the job driver
// (job/driver.h), the pure state machine that owns the job's steps, plans and recovery: the
// controller turns what it observes — registrations, heartbeats, worker exits, votes, plan
// readiness, saves, timers, operator requests — into the driver's events, and applies the actions
// that come back (send these messages, ask the planner, arm a timer, log, record the run). It owns
// membership with epochs, the event log, the rendezvous store, the planner (policy/planner.h),
// the log of committed steps and the run record, and serves the mesh endpoint (agents). It never
// moves tensors. What serves operators and scrapers — the console's REPL endpoint, the Prometheus
// endpoint — is attached from above (attachment.h: ControllerOptions::attach). (controller.cpp:
// setup, messages and liveness; controller_driver.cpp: the driver's events in and its actions out;
// controller_operator.cpp: operator actions and shutdown.)
//
// Everything runs on one libuv loop: the mesh ROUTER socket, a monitor that reports a dropped
// agent connection the moment its process dies, a liveness tick that ages silent nodes, pings to
// agents, and the attachments' endpoints. Bad input (garbage frames, wrong versions, oversized messages,
// unknown node ids) gets an error reply or is dropped with a rate-limited log line; nothing a peer
// sends can stop the controller.
#pragma once

#include <uv.h>
#include <zmq.hpp>

#include <nlohmann/json.hpp>

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "ckpt/slice_mac.h"
#include "core/log.h"
#include "job/config.h"
#include "job/driver.h"
#include "mesh/attachment.h"
#include "mesh/events.h"
#include "mesh/journal_file.h"
#include "mesh/membership.h"
#include "mesh/run_record.h"
#include "mesh/step_log.h"
#include "mesh/timer.h"
#include "wire/codec.h"

namespace sal::wire {
struct KeyPair;
}
namespace sal::comm {
class StoreServer;
}
namespace sal::policy {
class Planner;
}

namespace sal::mesh {

class ZmqWatcher;
class SocketMonitor;
class ZapHandler;
class Allowlist;

struct ControllerOptions {
  job::JobConfig job;
  int64_t max_steps = 0;   // steps to drive before reporting completion (0: none)
  std::string run_dir;     // events.csv and audit.log go here (empty: nowhere)
  // What serves beside the mesh endpoint, made at start() in this order (the console, the metrics
  // export: attachment.h).
  std::vector<Attach> attach;
  // Resume the job from its journal (`salamander controller --resume RUN_DIR`): the committed steps,
  // the plan in force, the snapshots, the policies and the node ids are taken back; the mesh binds
  // the endpoint the agents know (job.mesh.bind must be it).
  std::optional<job::JournalState> resume;
  // Continue a stopped job from its checkpoint (`salamander run --resume`): a fresh mesh whose
  // first plan restores every unit from it (job::ResumeFrom).
  std::optional<job::ResumeFrom> from_checkpoint;
};

class Controller {
 public:
  Controller(uv_loop_t* loop, zmq::context_t& ctx, ControllerOptions opts);
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Checks security rules, makes the attachments, binds the mesh endpoint, starts timers. Refuses
  // non-loopback binds without CURVE keys and an allowlist, and says why.
  Status start();
  const std::string& mesh_endpoint() const { return mesh_endpoint_; }
  // Where the attachment named `name` serves ("repl": the console; "metrics": the Prometheus
  // endpoint's URL with the port bound); "" when none is attached.
  std::string endpoint(const std::string& name) const;

  // Tells every live node to stop and calls `done` once all have left (or after a grace period).
  void shutdown(const std::string& reason, std::function<void()> done);
  bool stopping() const { return stopping_; }

  // Operator actions (REPL and drills). `who` is recorded in the event log.
  Status kill_node(NodeId id, const std::string& who);
  Status drain_node(NodeId id, const std::string& who);
  // SIGSTOPs the node's agent and workers (this host only) for `ms`, then SIGCONTs them.
  Status freeze_node(NodeId id, uint64_t ms, const std::string& who);
  // SIGKILLs the node's workers but not its agent (this host only): a worker process crash on a
  // healthy host, which its agent answers with a new worker (mesh.worker_restarts).
  Status crash_workers(NodeId id, const std::string& who);
  // A gray failure (a drill's slow{}): the node's workers (this host only, confined by --cpu-share)
  // get `factor` of their CPU quota for `ms`, then their quota back.
  Status slow_node(NodeId id, double factor, uint64_t ms, const std::string& who);
  // A drill's fault: the node's worker `index` dies at `point` of `step` (wire::FaultArm).
  Status arm_fault(NodeId id, uint32_t index, wire::FaultPoint point, std::optional<uint64_t> step,
                   const std::string& who);
  // A drill's fault injector (corrupt{}): the node's workers flip `bits` bits of their copy of
  // `unit` as step `step` begins (wire::FaultArm, point corrupt). Refused unless the job allows
  // fault injection (faults.inject).
  Status arm_corruption(NodeId id, const UnitId& unit, uint32_t bits, uint64_t step, const std::string& who);
  // A stop asked for (job.stop(), Ctrl-C, a drill's end): a running job first aborts the step in
  // flight and writes its final checkpoint (the driver's saving phase), then stops as below;
  // where nothing can be saved it stops at once. A second call while saving stops at once.
  void request_stop(const std::string& why);
  // The job is over (the driver's StopJob, or a stop that skips the save): on_stop_requested, or
  // shutdown() when nobody set it.
  void stop_now(const std::string& why);
  // An event from outside the controller's own decisions (a drill's action).
  void record_event(const std::string& kind, NodeId node, const std::string& detail) {
    events_.add(kind, node, membership_.epoch(), detail);
  }
  // Appends a record to the journal and syncs it before returning, on this thread (a drill's
  // progress: rare). Nothing to do for a run without a directory.
  Status journal_now(const job::Record& r);

  // Handles waiting mesh traffic, liveness and pings now. The REPL calls this from its budget
  // hook, so a long evaluation never starves heartbeats.
  void service();

  std::function<void()> on_change;                     // membership or steps changed
  std::function<void(const std::string&)> on_stop_requested;  // the job is over: stop the mesh (stop_now)
  std::function<void(uint64_t step)> on_committed;     // a step committed (drills watch this)
  // A plan update is about to go to its ranks (a drill may arm a fault in one that moves state).
  std::function<void(const wire::PlanUpdate&)> on_plan_sending;
  // Set by whoever can start nodes (`salamander run`): starts `count` more agents.
  std::function<Status(int count)> add_nodes;
  // Set by a host that runs this controller as its child process (cli/hosted_run.h): it SIGKILLs
  // this process and starts `controller --resume` after `restart_after_s` (a drill's
  // kill{controller = true}).
  std::function<Status(double restart_after_s)> restart_controller;
  // Set by a host whose mesh runs in network namespaces (drill/netns_lab.h): cuts the link of the
  // node that registered as `node_name` for `ms`, then restores it (a drill's partition{}).
  std::function<Status(const std::string& node_name, uint64_t ms)> partition_node;
  // Set by whoever runs drills: drill.start(path) in the REPL. Called off the loop (the chunk's
  // thread): reads and checks the script — its Lua runs there, under its budget — and returns what
  // starts it, which runs on the loop.
  std::function<Result<std::function<Status()>>(const std::string& path)> prepare_drill;
  std::function<nlohmann::ordered_json()> drill_status;  // the running drill, null if none

  // The policy slots and the current plan.
  policy::Planner& planner() { return *planner_; }
  // The job driver: phase, plans in force, steps, loads, snapshots (read only: it changes through events).
  const job::Driver& driver() const { return *driver_; }
  // A new plan at the next step boundary; with `use_loads`, balanced on the recent load window.
  void request_plan(const std::string& why, bool use_loads = false);
  const StepLog& step_log() const { return step_log_; }
  const RunRecord& record() const { return record_; }
  const std::string& store_endpoint() const { return store_endpoint_; }

  const Membership& membership() const { return membership_; }
  const job::StepCoordinator& steps() const { return driver_->steps(); }
  const EventLog& events() const { return events_; }
  const job::JobConfig& job() const { return opts_.job; }
  // The journal this controller resumed the job from (none: it started the job).
  const std::optional<job::JournalState>& resumed_from() const { return opts_.resume; }
  // The run's aborted and patched steps: this controller's, and those before it resumed the job.
  uint64_t aborted_steps() const { return steps().aborted() + (opts_.resume ? opts_.resume->aborted : 0); }
  uint64_t patched_steps() const { return steps().patched() + (opts_.resume ? opts_.resume->patched : 0); }
  // mesh.racks: node name -> rack (job/racks.h); empty when the job names none.
  const std::map<std::string, std::string>& racks() const { return rack_of_name_; }
  int64_t max_steps() const { return opts_.max_steps; }
  int64_t started_ns() const { return started_ns_; }

 private:
  Status setup_security();
  // Makes the attachments (ControllerOptions::attach) and hooks them to the events and policies.
  Status attach_all();
  // Tells every attachment (attachment.h).
  template <class F>
  void tell(F&& f) {
    for (auto& a : attachments_) f(*a);
  }
  void state_changed() {
    tell([](Attachment& a) { a.state_changed(); });
  }
  void on_mesh_message();
  void on_connection_event(int kind, int fd, const std::string& peer);
  void handle(const std::string& rid, int fd, const wire::Envelope& env);
  void handle_register(const std::string& rid, int fd, const wire::Envelope& env);
  void handle_heartbeat(const std::string& rid, const wire::Envelope& env);
  void handle_worker_event(const std::string& rid, const wire::Envelope& env);
  void handle_goodbye(const std::string& rid, const wire::Envelope& env);
  void handle_vote(const std::string& rid, const wire::Envelope& env);
  void reject(const std::string& rid, const std::string& peer, const Error& err);
  Node* sender(const std::string& rid, uint32_t claimed_id, const char* what);

  template <class M>
  void send_to(const std::string& rid, const M& msg) {
    deliver(rid, wire::encode(msg), M::kType);
  }
  template <class M>
  void broadcast(const M& msg) {
    for (const auto& [id, n] : membership_.nodes())
      if (n.live() || n.state == NodeState::draining) send_to(n.routing_id, msg);
  }
  void deliver(const std::string& rid, wire::Parts parts, wire::MsgType type);

  // ---- the driver (controller_driver.cpp) ----
  Status start_training();
  void feed(job::Event e);
  // Hands the waiting events to the driver, one at a time, unless a durable journal record is
  // being synced (the driver's next actions wait for it).
  void drain();
  // Applies actions in order; one that syncs the journal holds back those after it (after_sync_).
  void apply_all(std::vector<job::Action> actions);
  void journal_synced(const Status& s, double ms);
  void apply(const job::Action& a);
  void apply_send(const job::act::Send& s);
  void apply_decide(const job::act::DecidePlan& d);
  void apply_note(const job::act::Note& n);
  void apply_timer(job::Timer t, std::optional<uint64_t> ms);
  // train.record_routing: a step's global counts ([layer][expert] flattened) as
  // <run>/routing/table_iter<step>.log, in the SmartMoE format model.routing_trace replays.
  void record_routing(uint64_t step, const std::vector<uint64_t>& counts);
  void view_changed();
  bool confined(const Node& n);
  std::map<Participant, job::Holding> holdings() const;
  double now_s() const;
  // The journal (<run>/journal.jsonl), when the run has a directory.
  Status open_journal();
  // Appends a record; with `sync`, starts syncing it, and apply_all holds back the actions after it.
  void journal(const job::Record& r, bool sync = false);
  wire::Welcome welcome(NodeId id) const;

  void liveness_tick();
  void send_pings();
  void handle_plan_ready(const std::string& rid, const wire::Envelope& env);
  void handle_save_done(const std::string& rid, const wire::Envelope& env);
  void handle_slice_report(const std::string& rid, const wire::Envelope& env);
  void node_lost(NodeId id, const std::string& cause);
  void worker_lost(NodeId id, uint32_t index, const std::string& cause);
  void check_shutdown_done();
  // At the end of a job, once every node has left: the snapshot directories never completed go.
  void remove_incomplete_snapshots();
  void changed();

  uv_loop_t* loop_;
  zmq::context_t& ctx_;
  ControllerOptions opts_;
  EventLog events_;
  Membership membership_;
  std::unique_ptr<job::Driver> driver_;
  std::deque<job::Input> inbox_;   // events waiting for the driver (one is handled at a time)
  bool feeding_ = false;
  bool routing_failed_ = false;  // a routing record could not be written (said once; no more are tried)
  job::View last_view_;
  std::map<std::string, std::string> rack_of_name_;  // mesh.racks: node name -> rack (job/racks.h)
  std::map<uint64_t, bool> confined_pids_;  // a worker process on this host: in a CPU cgroup of its own (read once)
  std::vector<std::unique_ptr<Timer>> driver_timers_;  // one per job::Timer
  StepLog step_log_;
  RunRecord record_;
  std::unique_ptr<JournalFile> journal_;
  JournalSyncer journal_syncer_{loop_};  // loop_ is declared before it
  std::vector<job::Action> after_sync_;  // the driver's actions waiting for the journal's sync
  Epoch journaled_epoch_ = 0;
  std::unique_ptr<comm::StoreServer> store_;
  std::string store_endpoint_;

  zmq::socket_t mesh_;
  std::string mesh_endpoint_;
  std::unique_ptr<ZmqWatcher> mesh_watcher_;
  std::unique_ptr<SocketMonitor> mesh_monitor_;
  std::unique_ptr<ZapHandler> zap_;
  std::unique_ptr<wire::KeyPair> server_key_;
  std::unique_ptr<Allowlist> allow_;
  ckpt::SliceMacKey slice_mac_key_;  // the job's secret for sparse snapshot slices (JobSpec)
  std::unique_ptr<policy::Planner> planner_;
  std::vector<std::unique_ptr<Attachment>> attachments_;

  std::vector<std::shared_ptr<Timer>> thaw_timers_;  // frozen or slowed nodes waiting for their end
  void after_ms(uint64_t ms, std::function<void()> undo);
  Timer tick_timer_;
  Timer ping_timer_;
  Timer stop_timer_;
  int64_t next_ping_ns_ = 0;
  uint64_t ping_seq_ = 0;
  int64_t started_ns_ = 0;
  bool stopping_ = false;
  bool finishing_ = false;  // a stop was asked for: the final checkpoint is being written
  std::function<void()> stop_done_;
  KindLog bad_input_log_;  // bad input, logged once per kind
};

}  // namespace sal::mesh
