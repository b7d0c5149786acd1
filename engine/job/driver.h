// driver.h — the job driver: one pure state machine for a training job's steps, plans and
// recovery. The controller (engine/mesh) is I/O around it: it turns what it observes into events
// (driver_io.h), hands each to Driver::handle(), and applies the actions that come back. The
// driver does no I/O and reads no clock, so every failure story is a sequence of events in and
// actions out (tests/job/test_driver.cpp), and a log of its inputs replays the job.
//
// Phases. *gathering*: wait until the job's workers (mesh.nodes x devices) are ready, or
// mesh.join_window_ms after the first one, then plan. *planning*: ask the planner for a plan for
// the workers the recovery mode uses (ladder.h), map it onto them (plan_switch.h), send every rank
// its PlanUpdate, and wait for each to connect the plan's data plane, move state and answer
// PlanReady; then the plan is in force. *running*: steps, each with the plan's ranks as its
// participants (steps.h: applied everywhere or nowhere). At every step boundary the driver
// re-plans when the ready workers differ from the plan's ranks (at once for a loss, after
// mesh.join_batch_ms for joins), when train.rebalance_every steps have passed under the plan, or
// when an operator asked; an aborted step always leads to a new plan (its data plane is spent).
// *saving*: after the last step every rank writes its share of the final checkpoint. A step that
// fails three times in a row with the same workers, or a plan that fails five times in a row
// (retried after a pause that doubles), ends the job with the reason.
//
// The transition table (driver_table.cpp) lists, for each phase and kind of event, the handler
// that runs; an event a phase does not list is ignored. Recovery picks the cheapest rung of the
// ladder (ladder.h) that applies: elastic re-plan while every unit has a surviving holder, else a
// restore from the newest complete dense snapshot, else from the seed.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ckpt/book.h"
#include "job/config.h"
#include "job/driver_io.h"
#include "job/ladder.h"
#include "job/measurements.h"
#include "job/peer_windows.h"
#include "job/plan_switch.h"
#include "job/steps.h"

namespace sal::job {

enum class Phase : uint8_t { gathering, planning, running, saving, done, failed };
const char* phase_name(Phase p);

// A job continued from a checkpoint (`salamander run --resume`): its first plan restores every unit
// from `dir`, written after `step` steps, and training goes on with step `step`.
struct ResumeFrom {
  std::string dir;
  uint64_t step = 0;
};

// What the driver needs of the job's configuration.
struct DriverConfig {
  ModelShape model;
  uint32_t expected_workers = 0;  // mesh.nodes x devices per node
  int64_t join_window_ms = 5000;
  int64_t join_batch_ms = 1000;
  int64_t rebalance_every = 50;
  int64_t checkpoint_every = 50;   // dense snapshots (0: none)
  uint32_t peer_copies = 2;        // nodes holding each sparse snapshot slice (0: none)
  uint64_t peer_memory = 1ull << 30;  // bytes an agent may hold of them
  int64_t max_steps = 0;           // steps to run (0: none: keep the mesh up)
  std::string recovery = "elastic";
  uint32_t slots = 4;
  uint32_t min_replicas = 2;
  std::string run_dir;             // "" : no snapshots, no final checkpoint
  int64_t origin_ns = 0;           // the controller's start: times in records count from it
  std::optional<ResumeFrom> resume_from;
  static DriverConfig from(const JobConfig& job, int64_t max_steps, const std::string& run_dir, int64_t origin_ns);
};

class Driver {
 public:
  explicit Driver(DriverConfig cfg);
  // A job resumed from its journal by a restarted controller: the committed steps, the plan in
  // force and the snapshots as the journal has them. The driver first reconciles: it waits for the
  // plan's ranks (at most mesh.join_window_ms), brings a rank that missed the last commit up to it,
  // discards whatever step was in flight, and puts the plan in force again (every rank back, each
  // holding the committed state) or re-plans over those that came back.
  Driver(DriverConfig cfg, const JournalState& journal);

  // One event in, the actions it causes out (in order).
  std::vector<Action> handle(const Input& in);

  Phase phase() const { return phase_; }
  const View& view() const { return view_; }
  const StepCoordinator& steps() const { return steps_; }
  const std::optional<AppliedPlan>& applied() const { return applied_; }
  // The plan being switched to, if any (its number).
  std::optional<uint64_t> pending_plan() const;
  const LoadWindow& loads() const { return loads_; }
  const ckpt::SnapshotBook* snapshots() const { return snapshots_ ? &*snapshots_ : nullptr; }
  const CheckpointFacts& checkpoint_facts() const { return facts_; }
  // What each worker's last vote said it holds of the sparse snapshots (job.checkpoint()).
  const std::map<Participant, SparseHolding>& sparse_holdings() const { return sparse_; }
  // What each live agent last reported holding of them, and the window a restore would use now.
  const std::map<NodeId, wire::SliceReport>& peer_slices() const { return peer_slices_; }
  std::optional<PeerWindow> restorable() const { return peer_window(steps_.committed()); }
  const std::string& failure() const { return failure_; }
  const std::string& checkpoint_dir() const { return checkpoint_dir_; }
  bool stopping() const { return stopping_; }
  // Whether the controller should report what each worker holds in the view (while reconciling).
  bool wants_holdings() const { return resuming_; }
  const DriverConfig& config() const { return cfg_; }

  // The transition table's row for a phase and an event kind (driver_table.cpp); nullptr: ignored.
  using Handler = void (Driver::*)(const Event&);
  static Handler handler(Phase p, size_t event_kind, std::optional<Timer> timer);

 private:
  // What a plan switch in flight is waiting for.
  struct Pending {
    uint64_t number = 0;
    uint64_t step = 0;
    std::vector<Participant> ranks;
    plan::Plan plan;
    PlanSwitch sw;
    std::set<Participant> waiting;
    std::string reason;
    int64_t started_ns = 0;
    double slowest_connect_ms = 0, slowest_migrate_ms = 0;  // each over the workers
    std::optional<Rung> restore;  // restores instead of moving state
    std::string restore_from;
    std::optional<uint64_t> restore_window;  // a sparse restore's window (its first and last iterations)
    std::optional<uint64_t> restore_to;
  };
  // A plan decision asked for and not yet answered.
  struct Deciding {
    uint64_t decision = 0;
    std::string why;
    WorkerChoice choice;
    uint64_t step = 0;
    Epoch epoch = 0;
    bool must_switch = false;  // the data plane in force is spent: even the same placement is switched to
  };
  // From a lost worker (an aborted step, or fewer workers at a boundary) to the next committed step.
  struct Recovery {
    std::string cause;
    int64_t since_ns = 0;
    bool restored = false;
    bool patched = false;  // SPARe's patch kept the step in flight
    std::string source;  // the restore's: "peers", "disk" or "seed"
    uint64_t rerun = 0;  // committed steps its restores run again
  };
  struct Tally {
    uint64_t step = 0;
    double ce = 0, aux = 0, grad_norm = 0, lr = 0, compute_ms = 0;
    uint64_t tokens = 0;
    std::vector<uint64_t> loads;
    int64_t begun_ns = 0;
    std::set<Participant> voted;  // whose measurements the tally holds
  };
  // What the retry timer does when it fires.
  struct Retry {
    bool after_abort = false;              // an aborted step (else a failed plan)
    std::string why;
    std::vector<Participant> ranks;        // the aborted step's (sorted)
    uint64_t step = 0;
    std::set<Participant> lost;            // a patched step's losses: all seen gone before planning
  };

  // ---- handlers (the rows of the transition table) ----
  void on_membership(const Event& e);  // the phase's look at the state ("poke")
  void on_timer(const Event& e);
  void on_lost(const Event& e);
  void on_vote(const Event& e);
  void on_ready(const Event& e);
  void on_saved(const Event& e);
  void on_decided(const Event& e);
  void on_request(const Event& e);
  void on_stop(const Event& e);
  void on_slices(const Event& e);
  void on_patch_decided(const Event& e);

  // ---- the phases ----
  void poke();
  void gather();
  void reconcile();
  std::vector<Participant> bring_up_to_date();
  void start_plan(const std::string& why);
  void plan_decided(const Deciding& d, const PlanRecord& rec);
  static std::string stacks_text(const PlanRecord& rec);
  void start_restore(const PlanRecord& rec, const WorkerChoice& choice);
  void start_sparse_restore(const PlanRecord& rec, const WorkerChoice& choice, const PeerWindow& window);
  void start_resume(const PlanRecord& rec, const Deciding& d);
  // Where a restore's units come from: the rung, in words, and the directory ("": the seed).
  struct RestoreSource {
    Rung rung;
    std::string what, dir;
    std::optional<PeerWindow> window;  // the sparse rung's
  };
  void begin_restore_switch(const PlanRecord& rec, const PlanSwitch& sw, Epoch epoch, uint64_t step,
                            const RestoreSource& source, const std::string& why);
  void begin_switch(Pending p, wire::PlanUpdate u);
  void plan_applied();
  void cannot_plan(const std::string& why);
  void plan_failed(const std::string& why, bool membership = false);
  void check_pending();
  void boundary();
  bool join_batch_over();
  void begin_step();
  void step_outcome(StepCoordinator::Outcome o);
  void step_aborted();
  // ---- SPARe's patch (driver_patch.cpp) ----
  // A loss in the middle of a grouped plan's step: asks the redundancy policy for a patch instead
  // of aborting; false when the step cannot be patched (one group, a replay, a stop, no survivor).
  bool try_patch(const in::Lost& l);
  // Whether a vote answers the patch in force (or the step as begun, when none was sent).
  bool vote_answers_patch(const wire::StepVote& v) const;
  void send_patch(const plan::ShardStacks& stacks, const std::string& decided_by);
  std::string patch_losses() const;
  StepRecord step_record() const;  // the committed step's metrics
  void committed(const StepRecord& r);
  void retry_fired();
  void end_settle_if_cause_seen();
  void start_save(const std::string& done);
  void check_savers();
  void finish_save(bool ok, const std::string& detail);
  void fail_job(const std::string& why);

  // ---- helpers ----
  void set_phase(Phase p, const std::string& detail = "");
  void note(std::string kind, std::string detail, act::Level level = act::Level::info, bool quiet = false);
  void send(const std::vector<Participant>& ranks, act::Message msg);
  void abort_ranks(const std::vector<Participant>& ranks, uint64_t step, const std::string& why);
  void arm(Timer t, uint64_t ms) { out_.push_back(act::ArmTimer{t, ms}); }
  void cancel(Timer t) { out_.push_back(act::CancelTimer{t}); }
  void recovery_begins(const std::string& cause);
  void recovery_ends(uint64_t step);
  void maybe_snapshot();
  void snapshot_answered(const wire::SaveDone& d);
  void warn_if_disk_behind(const ckpt::Snapshot& s);
  void drop_snapshots_of_lost();
  WorkerChoice choose(const std::vector<Participant>& ready, uint64_t step) const;
  // The newest window of sparse snapshots in the live agents' memory that restores the model.
  std::optional<PeerWindow> peer_window(uint64_t committed) const;
  // Where each rank of `u` puts its sparse snapshot slots, and what an agent may hold.
  void add_slice_peers(wire::PlanUpdate& u) const;
  // A sparse restore that could not be applied: its window is not tried again, and the steps it
  // would have replayed count as lost after all.
  void sparse_restore_failed(const std::string& why);
  double now_s() const { return double(now_ns_ - cfg_.origin_ns) / 1e9; }

  DriverConfig cfg_;
  std::vector<Action> out_;  // the actions of the event being handled
  int64_t now_ns_ = 0;
  Phase phase_ = Phase::gathering;
  bool stopping_ = false;
  bool resuming_ = false;     // reconciling a resumed job
  bool keep_applied_ = false; // the next plan is the one in force again (every rank came back)
  bool plane_spent_ = false;  // a step aborted or a switch failed: the workers' data plane is gone
  View view_;
  StepCoordinator steps_;
  std::optional<AppliedPlan> applied_;
  std::optional<Pending> pending_;
  std::optional<Deciding> deciding_;
  uint64_t decisions_ = 0;
  uint64_t plans_ = 0;  // the number of the newest plan decided
  Tally tally_;
  LoadWindow loads_;
  MovingMedian step_s_;
  MovingMedian snapshot_Bps_;
  bool disk_behind_warned_ = false;  // snapshot_slow said (once a job)
  CheckpointFacts facts_;
  std::map<Participant, SparseHolding> sparse_;
  std::map<NodeId, wire::SliceReport> peer_slices_;  // what each agent last reported holding
  std::set<uint64_t> peer_windows_failed_;           // windows (first iteration) a restore failed to load
  std::map<NodeId, uint32_t> refusals_said_;         // per node: its refusals when the last was said
  uint64_t sparse_replaced_ = 0;                     // a sparse restore in flight: the committed steps before it
  std::optional<uint64_t> replay_to_;                // a sparse restore in force replays up to this iteration
  // Until the replay's last iteration commits, no plan may move state (joins and rebalances wait;
  // a loss restores again).
  bool replaying() const { return replay_to_ && steps_.committed() <= *replay_to_; }
  // A vote's word on the worker's sparse snapshots; a slot big enough to time measures the copy
  // bandwidth the checkpoint policy decides with (as a dense snapshot's copy does).
  void sparse_copied(Participant p, const wire::StepVote& v);
  static constexpr uint64_t kTimedSlotBytes = 1u << 20;
  bool plan_wanted_ = false;
  bool plan_with_loads_ = false;
  std::string plan_reason_;
  int plan_failures_ = 0;
  std::string cannot_plan_;  // why no plan could be made, last said (said again only when it changes)
  int step_failures_ = 0;
  std::optional<Recovery> recovery_;
  std::optional<Retry> retry_;
  int64_t gather_since_ns_ = 0;
  bool gate_over_ = false;    // the join window's timer fired
  int64_t join_seen_ns_ = 0;  // when workers that are not ranks were first seen ready
  bool join_over_ = false;    // the join batch's timer fired
  std::set<Participant> save_waiting_;
  uint32_t saved_units_ = 0;
  std::string checkpoint_dir_;
  std::string save_done_;  // what the job's end says once the final checkpoint is written
  bool stop_save_ = false; // the final save is a stop's (a failed one then does not fail the job)
  std::string failure_;
  std::optional<ckpt::SnapshotBook> snapshots_;
  // The step in flight's patch (SPARe): who it lost, the groups whose work it drops, the patches
  // sent so far, and the policy decision awaited.
  struct Patching {
    uint64_t step = 0;
    uint32_t sent = 0;
    std::set<Participant> lost;
    std::set<uint32_t> damaged;
    std::optional<uint64_t> deciding;
  };
  std::optional<Patching> patch_;
};

}  // namespace sal::job
