// driver.h — the job driver: one pure state machine for a training job's steps, plans and
// recovery. The controller (engine/mesh) is I/O around it: it turns what it observes into events
// (driver_io.h), hands each to Driver::handle(), and applies the actions that come back. The
// driver does no I/O and reads no clock, so every failure story is a sequence of events in and
// actions out (tests/job/test_driver*.cpp), and a log of its inputs replays the job.
//
// Phases (driver_phases.h). The job gathers its workers (mesh.nodes x devices, or as many as came
// within mesh.join_window_ms), asks the planner for a plan for the workers the recovery mode uses
// (ladder.h), maps it onto them (plan_switch.h), sends every rank its PlanUpdate and waits for each
// to connect the plan's data plane, move state and answer PlanReady; then the plan is in force and
// the job runs steps, each with the plan's ranks as its participants (steps.h: applied everywhere
// or nowhere). At every step boundary the driver re-plans when the ready workers differ from the
// plan's ranks (at once for a loss, after mesh.join_batch_ms for joins), when
// train.rebalance_every steps have passed under the plan, or when an operator asked; an aborted
// step always leads to a new plan (its data plane is spent). After the last step every rank
// writes its share of the final checkpoint. A step that fails three times in a row with the same
// workers, or a plan that fails five times in a row (retried after a pause that doubles), ends the
// job with the reason.
//
// The transition table (driver_table.cpp) lists, for each phase and kind of event, the handler
// that runs and the phases it may move to; a handler returns the next phase (or none: it stays),
// and the table's dispatcher is the one place the phase changes. An event a phase does not list
// is ignored. Recovery picks the cheapest rung of the ladder (ladder.h) that applies: SPARe's
// patch of the step in flight (driver_patch.cpp), an elastic re-plan while every unit has a
// surviving holder, else a restore from a window of sparse snapshots in the agents' memory
// (peer_windows.h), from the newest complete dense snapshot, or from the seed
// (driver_recovery.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ckpt/book.h"
#include "job/config.h"
#include "job/driver_io.h"
#include "job/driver_phases.h"
#include "job/ladder.h"
#include "job/measurements.h"
#include "job/peer_windows.h"
#include "job/plan_switch.h"
#include "job/steps.h"
#include "job/work_shares.h"

namespace sal::job {

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
  int64_t capacity_wait_ms = 600000;  // without a plan for this long the job fails (0: it waits on)
  int64_t rebalance_every = 50;
  int64_t checkpoint_every = 50;   // dense snapshots (0: none)
  uint32_t peer_copies = 2;        // nodes holding each sparse snapshot slice (0: none)
  bool expert_logs = false;        // the workers put upstream logs with their slices (the rebuild rung)
  uint64_t peer_memory = 1ull << 30;  // bytes an agent may hold of them
  int64_t max_steps = 0;           // steps to run (0: none: keep the mesh up)
  std::string recovery = "elastic";
  bool relaunch = false;           // the baselines' dense and seed restores relaunch the workers (train.restart)
  bool dispatch_by_counts = true;  // train.dispatch = "counts" (the step records' imbalance follows it)
  int64_t record_routing = 0;      // steps between records of the routing (0: none)
  uint32_t slots = 4;
  uint32_t min_replicas = 2;
  std::string run_dir;             // "" : no snapshots, no final checkpoint
  int64_t origin_ns = 0;           // the controller's start: times in records count from it
  std::optional<ResumeFrom> resume_from;
  static DriverConfig from(const JobConfig& job, int64_t max_steps, const std::string& run_dir, int64_t origin_ns);
};

// A span of `ns` in the driver's texts: "123 ms", or whole seconds from 10 s on.
std::string ms_text(int64_t ns);

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

  Phase phase() const { return coarse(state_); }
  const State& state() const { return state_; }
  const View& view() const { return view_; }
  const StepCoordinator& steps() const { return steps_; }
  const std::optional<AppliedPlan>& applied() const { return applied_; }
  // The degraded steps under way after a patched step (SPARe), if any.
  const phase::Degraded* degraded() const {
    const auto* r = std::get_if<phase::Running>(&state_);
    return r && r->degraded ? &*r->degraded : nullptr;
  }
  // The plan being switched to, if any (its number).
  std::optional<uint64_t> pending_plan() const;
  const LoadWindow& loads() const { return measured_.loads(); }
  const ckpt::SnapshotBook* snapshots() const { return snapshots_ ? &*snapshots_ : nullptr; }
  const CheckpointFacts& checkpoint_facts() const { return measured_.facts(); }
  // What each worker's last vote said it holds of the sparse snapshots (job.checkpoint()).
  const std::map<Participant, SparseHolding>& sparse_holdings() const { return measured_.sparse(); }
  // Each worker's recent step times and speed verdict (job.health()), and its share of the work.
  const SpeedWatch& health() const { return measured_.speed(); }
  const WorkShares& shares() const { return shares_; }
  // The copies each worker held that disagreed with their unit's majority (driver_digests.cpp).
  const std::map<Participant, uint64_t>& corrupt_copies() const { return corrupt_copies_; }
  // What each live agent last reported holding of them, and the window a restore would use now.
  const std::map<NodeId, wire::SliceReport>& peer_slices() const { return peers_.reports(); }
  std::optional<PeerWindow> restorable() const { return peer_window(steps_.committed()); }
  // Why the plan switched to last takes no sparse snapshots ("" when it takes them, or none are kept).
  std::string sparse_off() const { return sparse_off_.value_or(""); }
  // Why the job failed ("" unless it did); where its final checkpoint is ("" until one is written).
  const std::string& failure() const;
  const std::string& checkpoint_dir() const;
  // Whether the controller should report what each worker holds in the view (while reconciling).
  bool wants_holdings() const { return std::holds_alternative<phase::Reconciling>(state_); }
  const DriverConfig& config() const { return cfg_; }

  // What a handler answers: the phase to move to, or none to stay (its state changed in place).
  using Next = std::optional<State>;
  using Handler = Next (Driver::*)(const Event&);
  // The handler the transition table gives an event kind (its index in Event) in some state of
  // the coarse phase `p`; nullptr: ignored there.
  static Handler handler(Phase p, size_t event_kind, std::optional<Timer> timer);

 private:
  // A row of the transition table (driver_table.cpp).
  struct Row;
  static const Row* row(size_t state, size_t event_kind, std::optional<Timer> timer);

  // ---- the rows of the transition table ----
  Next on_gather(const Event& e);        // gathering: membership, the join window, a deferred look
  Next on_reconcile(const Event& e);     // reconciling: likewise, over the journaled plan's ranks
  Next on_view(const Event& e);          // deciding: a new view (the decision is checked against it)
  Next on_decided(const Event& e);
  Next on_switch_view(const Event& e);   // switching: a pending rank left
  Next on_ready(const Event& e);
  Next on_switch_timeout(const Event& e);
  Next on_capacity_timeout(const Event& e);
  Next on_retry_view(const Event& e);    // retrying: the cause of an aborted step seen
  Next on_retry(const Event& e);
  Next on_boundary(const Event& e);      // running: between steps, a look at the state
  Next on_join_batch(const Event& e);
  Next on_vote(const Event& e);
  Next on_lost(const Event& e);
  Next on_patch_decided(const Event& e);
  Next on_saver_view(const Event& e);    // saving: a saver left
  Next on_save_timeout(const Event& e);
  Next on_saved(const Event& e);         // any phase
  Next on_request(const Event& e);
  Next on_stop(const Event& e);
  Next on_slices(const Event& e);
  Next on_settling_slices(const Event& e);  // retrying: a report may end the pause for them
  Next on_health_decided(const Event& e);

  // The one place the phase changes: the table's dispatcher (handle()) with the "to" column of the
  // row that ran (driver_table.cpp).
  void set_phase(uint16_t allowed, State next) {
    check_transition(allowed, next);
    record_phase(next);
    state_ = std::move(next);
  }
  void check_transition(uint16_t allowed, const State& next);
  void record_phase(const State& next);

  // ---- gathering and planning (driver.cpp) ----
  Next gather(phase::Gathering& g);
  bool window_over(phase::Window& w, int64_t ms);
  Next start_plan(std::string why, bool with_loads = false, bool keep = false);
  Next plan_decided(const phase::Deciding& d, const PlanRecord& rec);
  static std::string stacks_text(const PlanRecord& rec);
  static std::string arranged_text(const Arranged& a);
  Next begin_switch(phase::Switching p, wire::PlanUpdate u);
  Next plan_applied(phase::Switching& p);
  Next cannot_plan(const std::string& why, const std::string& detail);
  void capacity_back();
  Next plan_failed(phase::Switching& p, const std::string& why, bool membership = false);
  Next retry(phase::Retrying r);
  Next cause_seen(phase::Retrying& r);
  Next settle_reports(const std::string& why, int64_t until);
  uint64_t ms_until(int64_t until) const;
  void windows_made_now();
  WorkerChoice choose(const std::vector<Participant>& ready, uint64_t step) const;
  // The newest window of sparse snapshots in the live agents' memory that restores the model.
  std::optional<PeerWindow> peer_window(uint64_t committed) const;
  bool windows_may_serve() const;
  std::optional<int64_t> settle_deadline() const;
  bool next_window_due(const PeerWindow& w, uint64_t committed) const;
  // Where each rank of `u` puts its sparse snapshot slots, and what an agent may hold.
  void add_slice_peers(wire::PlanUpdate& u) const;
  // The plan in force's slice peers without the `lost` ranks (a patch's): none when no copies are
  // kept, or when the plan's schedule is not worth taking beside the dense snapshots.
  std::vector<wire::SlicePeers> slice_peers(const std::vector<uint32_t>& node_of_rank, const plan::Plan& plan,
                                            const std::vector<uint32_t>& lost = {}) const;
  // Why the sparse snapshots of `plan` are not taken (plan/schedule.h: sparse_not_taken), "" when
  // they are; and the event when that changes with a plan put in force.
  std::string sparse_not_taken(const plan::Plan& plan) const;
  void note_sparse_taken(const plan::Plan& plan);
  bool replaying() const { return peers_.replaying(steps_.committed()); }

  // ---- steps (driver.cpp) ----
  Next in_force();  // a plan just came into force: the first boundary
  Next boundary(phase::Running& r);
  bool join_batch_over(phase::Running& r);
  void begin_step(phase::Running& r);
  Next step_outcome(phase::Running& r, StepCoordinator::Outcome o);
  void announce_abort(const phase::Tally& t);
  Next step_aborted(phase::Running& r);
  StepRecord step_record(const phase::Tally& t) const;  // the committed step's metrics
  void committed(phase::Running& r, const StepRecord& rec);

  // ---- SPARe's patch (driver_patch.cpp) ----
  // A loss in the middle of a grouped plan's step: asks the redundancy policy for a patch instead
  // of aborting; false when the step cannot be patched (one group, a replay, no survivor).
  bool try_patch(phase::Running& r, const in::Lost& l);
  CpuPools cpu_pools() const;
  // Whether a vote answers the patch in force (or the step as begun, when none was sent).
  static bool vote_answers_patch(const phase::Running& r, const wire::StepVote& v);
  Next send_patch(phase::Running& r, const plan::ShardStacks& stacks, const std::string& decided_by);
  static std::string patch_losses(const phase::Patching& p);
  // A patched step committed: train on degraded (phase::Degraded), or regroup at once.
  void after_patched_step(phase::Running& r);
  void degraded_step_committed(phase::Running& r, double step_ms);
  std::optional<uint64_t> steps_to_replan() const;
  std::string idle_survivors_cost(const phase::Patching& p, double normal_ms, double regroup_ms) const;
  void regroup(const std::string& why);  // the survivors re-plan at the next boundary

  // ---- the end (driver.cpp) ----
  // `attempt` > 0: again, after `cause` (a saver lost) ended the one before.
  Next start_save(const std::string& done, bool after_stop = false, uint32_t attempt = 0, const std::string& cause = "");
  Next finish_save(phase::Saving& s, bool ok, const std::string& detail);
  Next fail_job(const std::string& why);
  Next end_job(const std::string& said, const std::string& checkpoint_dir = "");

  // ---- recovery (driver_recovery.cpp) ----
  Next reconcile(phase::Reconciling& r);
  std::vector<Participant> bring_up_to_date();
  Next start_restore(const PlanRecord& rec, const WorkerChoice& choice);
  Next start_sparse_restore(const PlanRecord& rec, const WorkerChoice& choice, const PeerWindow& window);
  static std::string steps_run_again(uint64_t to, uint64_t committed);
  Next start_resume(const PlanRecord& rec, const phase::Deciding& d);
  // Where a restore's units come from: the rung, in words, and the directory ("": the seed).
  struct RestoreSource {
    Rung rung;
    std::string what, dir;
    std::optional<PeerWindow> window;  // the sparse rung's
    bool relaunch = false;             // the workers start again as new processes first
  };
  Next begin_restore_switch(const PlanRecord& rec, const PlanSwitch& sw, Epoch epoch, uint64_t step,
                            const RestoreSource& source, const std::string& why);
  void dense_restore_failed(const phase::Switching& p, const std::string& why);
  // A sparse restore that could not be applied: its window is not tried again; the restore that
  // follows counts the steps run again from where the job was before the first (PeerWindows::replaced).
  void sparse_restore_failed(const phase::Switching& p, const std::string& why);
  // ---- the rebuild rung (driver_rebuild.cpp) ----
  bool can_rebuild(const std::vector<std::string>& lost, const std::vector<Participant>& use) const;
  Next start_rebuild(const PlanRecord& rec, const WorkerChoice& choice);
  void norm_committed(uint64_t step, double grad_norm);
  void rebuild_failed(const phase::Switching& p, const std::string& why);
  void recovery_begins(const std::string& cause);
  void recovery_computing();
  void recovery_ends(uint64_t step);
  void maybe_snapshot(const std::set<Participant>& lost = {});
  void snapshot_answered(const wire::SaveDone& d);
  void drop_snapshots_of_lost();

  // ---- the health policy (driver_health.cpp) ----
  // At a commit: asks the health policy when a verdict changed (or a worker with less than an even
  // share is due a look).
  void consult_health(uint64_t step, bool verdict_changed);
  // The fewest workers the job may be drained to: each expert's floor on distinct workers, in their slots.
  uint32_t min_workers() const;

  // ---- digests: catching corruption (driver_digests.cpp, digests.h) ----
  // When `v` completes the step's votes: whether the holders of some unit disagree (then the
  // events are out and the repairs pending; the step must abort with digest_abort_).
  bool digests_disagree(phase::Running& r, const wire::StepVote& v);
  // The units a plan cannot repair from a majority's copy (none, or its holders gone): a restore.
  std::vector<std::string> unrepairable() const;
  bool repair_keeps_plan() const;  // the plan in force again, with the repairs (same workers)
  // The pending repairs into a switch to `next`; false when they cannot be (then planned again).
  bool add_pending_repairs(PlanSwitch& sw, const plan::Plan& next, uint64_t number);
  void repairs_applied(const phase::Switching& p);

  // ---- helpers ----
  void note(std::string kind, std::string detail, act::Level level = act::Level::info, bool quiet = false);
  void send(const std::vector<Participant>& ranks, act::Message msg);
  // StepAbort to `ranks`: the step in flight (plan 0) or the plan being switched to (its number).
  void abort_ranks(const std::vector<Participant>& ranks, uint64_t step, const std::string& why, uint64_t plan = 0);
  void arm(Timer t, uint64_t ms) { out_.push_back(act::ArmTimer{t, ms}); }
  void cancel(Timer t) { out_.push_back(act::CancelTimer{t}); }
  double now_s() const { return double(now_ns_ - cfg_.origin_ns) / 1e9; }

  // From a lost worker (an aborted step, or fewer workers at a boundary) to the next committed step.
  struct Recovery {
    std::string cause;
    int64_t since_ns = 0;
    bool restored = false;
    bool patched = false;  // SPARe's patch kept the step in flight
    std::string source;    // the restore's: "peers", "disk" or "seed"
    uint64_t rerun = 0;    // committed steps run again: from `committed` back to where the last restore went
    uint64_t committed = 0;  // steps committed when it began (a commit ends it: restores only rewind)
    int64_t capacity_ns = 0;  // of it, waiting for workers enough to plan (not the engine's time)
    int64_t computing_since_ns = 0;  // a plan of this recovery in force: its steps run (0: none yet)
    int64_t interrupted_ns = 0;      // of it, computing steps that a later loss aborted (not the engine's)
  };
  Recovery new_recovery(const std::string& cause) const;
  // A new plan someone asked for, taken at the next step boundary.
  struct Wanted {
    std::string why;
    bool with_loads = false;
  };
  // Failures in a row, and what was last said of why no plan can be made.
  struct Streak {
    int plans = 0;
    int steps = 0;
    std::string cannot_plan;  // said again only when it changes
    int64_t cannot_plan_since_ns = 0;  // waiting for capacity since (0: a plan can be made)
  };

  DriverConfig cfg_;
  std::vector<Action> out_;  // the actions of the event being handled
  int64_t now_ns_ = 0;
  // The last commit, or the first event (0: none yet): what makes the windows the agents report
  // (settle_deadline).
  int64_t last_commit_ns_ = 0;
  State state_;
  View view_;
  StepCoordinator steps_;
  std::optional<AppliedPlan> applied_;
  bool plane_spent_ = false;  // a step aborted or a switch failed: the workers' data plane is gone
  // The data planes the last committed step used are intact (no abort, no failed switch since): the
  // next plan's ranks keep those whose ranks do not change (PlanUpdate.keep_planes_of).
  bool planes_intact_ = false;
  std::optional<Wanted> wanted_;
  std::optional<Recovery> recovery_;
  Streak streak_;
  uint64_t decisions_ = 0;  // the planner's and the redundancy policy's questions, numbered
  Measurements measured_;
  WorkShares shares_;  // each worker's share of the work (the health policy's)
  PeerWindows peers_;
  std::optional<std::string> sparse_off_;  // the last plan switched to: why no sparse snapshots ("" taken)
  bool rebuild_failed_ = false;  // a rebuild of this loss failed: the sparse rung until a plan is in force
  // A dense or seed restore whose plan was abandoned: the steps were rewound and the workers may
  // hold the state of before it, part of the snapshot's, or (relaunched) none — the next plan
  // restores again, whatever else it would do, until a plan is in force. Why, for its event.
  std::optional<std::string> restore_owed_;
  std::map<uint64_t, double> norms_;  // the recent committed steps' global gradient norms (a rebuild clips with them)
  std::optional<ckpt::SnapshotBook> snapshots_;
  // Copies that disagreed with their unit's other holders: repaired by the next plan (digests.h).
  struct Repairs {
    std::vector<Repair> from_majority;
    std::vector<std::string> unrepairable;  // units with no majority: the next plan restores
    std::optional<uint64_t> plan;           // the plan that carries them
    std::optional<uint64_t> from_step;      // the plan in force's first step (its rebalance clock)
    bool keeps_placement = false;           // that plan places as the one before it, on the same ranks
    std::string abort_reason;
    bool empty() const { return from_majority.empty() && unrepairable.empty(); }
  };
  Repairs repairs_;
  std::map<Participant, uint64_t> corrupt_copies_;
};

}  // namespace sal::job
