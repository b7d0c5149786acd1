// training.h — the controller's training driver: it decides when the workers switch plans and
// when they step, and keeps the training metrics (training.cpp; the recovery half in
// training_recovery.cpp).
//
// Phases. *gathering*: wait until the job's workers (mesh.nodes x devices) are ready, or
// mesh.join_window_ms after the first one, then plan. *planning*: the planner decides a plan for
// the ready workers, plan_switch.h turns it into ranks and unit transfers, every participant gets
// a PlanUpdate, connects the plan's data plane through the controller's rendezvous store, moves
// state, and answers PlanReady; when all have, the plan is in force. *running*: steps, each with
// the plan's ranks as its participants (steps.h: applied everywhere or nowhere). At every step
// boundary the driver switches plans when the ready workers differ from the plan's ranks (at once
// for a loss, after mesh.join_batch_ms for joins), when
// train.rebalance_every steps have passed under the plan, or when an operator asked
// (job.rebalance(), policy.load); an aborted step always leads to a new plan (its data plane is
// spent). *saving*: after the last step every rank writes its share of a dense checkpoint into
// <run>/checkpoint. A step that fails three times in a row with the same workers, or a plan that
// fails five times in a row (retried after a pause that doubles), ends the job with the reason.
//
// Recovery. Which workers a plan uses and whether it must restore is train.recovery's rule
// (recovery_modes.h). Elastic recovery moves the lost replicas' state from survivors; when some
// state lost every holder, the plan instead restores the newest complete dense snapshot
// (snapshots.h; taken every train.checkpoint_every steps) — or the seed, before the first — and the
// steps after it are run again (they count as lost). Each loss is a recovery, from the loss to the
// next committed step, recorded with its cause (run_record.h) for the summary and the report.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "mesh/metrics.h"
#include "mesh/plan_switch.h"
#include "mesh/planner.h"
#include "mesh/run_record.h"
#include "mesh/snapshots.h"
#include "mesh/steps.h"
#include "mesh/timer.h"
#include "wire/messages.h"

namespace sal::comm {
class StoreServer;
}

namespace sal::mesh {

class Controller;

class Training {
 public:
  enum class Phase { gathering, planning, running, saving, done, failed };

  explicit Training(Controller& c);
  ~Training();

  // Starts the rendezvous store (bound on the mesh endpoint's host) and opens metrics.csv.
  Status start();

  // Something changed (membership, worker states): plan or step if it is time.
  void poke();
  // A vote's measurements; call before the vote is counted.
  void on_vote(const wire::StepVote& v);
  // What counting a vote, or losing a participant, did to the step in flight.
  void outcome(StepCoordinator::Outcome o);
  void on_plan_ready(const wire::PlanReady& r);
  void on_save_done(const wire::SaveDone& d);
  // A new plan at the next step boundary; with `use_loads`, balanced on the recent load window.
  void request_plan(const std::string& why, bool use_loads = false);
  // The job is stopping: ends the step or plan in flight.
  void stop(const std::string& why);

  Phase phase() const { return phase_; }
  static const char* phase_name(Phase p);
  const MetricsLog& metrics() const { return metrics_; }
  const LoadWindow& loads() const { return loads_; }
  const std::optional<AppliedPlan>& applied() const { return applied_; }
  const std::string& failure() const { return failure_; }
  const std::string& checkpoint_dir() const { return checkpoint_dir_; }
  const std::string& store_endpoint() const { return store_endpoint_; }
  const RunRecord& record() const { return record_; }
  const SnapshotBook* snapshots() const { return snapshots_.get(); }
  // Seconds since the controller started.
  double now_s() const;

 private:
  struct Pending {
    uint64_t number = 0;
    uint64_t step = 0;
    std::vector<Participant> ranks;
    plan::Plan plan;
    PlanSwitch sw;
    std::set<Participant> waiting;
    std::string reason;
    int64_t started_ns = 0;
    double slowest_ms = 0;
    double slowest_connect_ms = 0, slowest_migrate_ms = 0;  // each over the workers
    bool restore = false;   // loads a checkpoint instead of moving state
    std::string restore_from;
  };
  // From a lost worker (an aborted step, or fewer workers at a boundary) to the next committed step.
  struct Recovery {
    std::string cause;
    int64_t since_ns = 0;
    bool restored = false;
  };
  struct Tally {
    uint64_t step = 0;
    double ce = 0, aux = 0, grad_norm = 0, lr = 0, compute_ms = 0;
    uint64_t tokens = 0;
    std::vector<uint64_t> loads;
    int64_t begun_ns = 0;
  };

  std::vector<Participant> ready_participants() const;
  size_t expected_workers() const;
  void gather();
  std::string none_could_start() const;
  void boundary();
  bool join_batch_over();
  void begin_step();
  void committed();
  void set_phase(Phase p, const std::string& detail = "");
  void start_plan(const std::string& why);
  Result<PlanRecord> decide_plan(size_t workers, Epoch epoch);
  void start_restore(const PlanRecord& rec, const std::vector<Participant>& use, const std::string& why);
  void begin_switch(Pending p, wire::PlanUpdate u);
  void maybe_snapshot();
  void on_snapshot_done(const wire::SaveDone& d);
  void send_plan(const wire::PlanUpdate& u, const std::vector<Participant>& ranks);
  void plan_applied();
  // A plan that cannot complete. `membership` (a rank left) is not the plan's fault: it does not
  // count towards the consecutive failures that end the job.
  void plan_failed(const std::string& why, bool membership = false);
  void check_pending();
  void abort_nodes(const std::vector<Participant>& who, uint64_t step, const std::string& why);
  void start_save();
  void finish_save(bool ok, const std::string& detail);
  void fail_job(const std::string& why);
  void erase_plan_keys(uint64_t number);
  void recovery_begins(const std::string& cause);
  void recovery_ends(uint64_t step);

  Controller& c_;
  Phase phase_ = Phase::gathering;
  RunRecord record_;
  std::unique_ptr<SnapshotBook> snapshots_;
  std::unique_ptr<comm::StoreServer> store_;
  std::string store_endpoint_;
  std::optional<AppliedPlan> applied_;
  std::optional<Pending> pending_;
  Tally tally_;
  std::set<Participant> voted_;  // whose measurements the tally holds
  MetricsLog metrics_;
  LoadWindow loads_;
  bool plan_wanted_ = false;
  bool plan_with_loads_ = false;
  std::string plan_reason_;
  int plan_failures_ = 0;
  int step_failures_ = 0;
  std::optional<Recovery> recovery_;
  bool in_poke_ = false;
  int64_t gather_since_ns_ = 0;
  std::set<Participant> save_waiting_;
  uint32_t saved_units_ = 0;
  std::string checkpoint_dir_;
  std::string failure_;
  Timer gate_timer_;
  Timer plan_timer_;
  Timer retry_timer_;
  Timer join_timer_;
  int64_t join_seen_ns_ = 0;  // when workers that are not ranks were first seen ready
  Timer soon_timer_;
};

}  // namespace sal::mesh
