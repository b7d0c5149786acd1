// trainer.h — a worker's training state and its step: the units it holds (in host model::Params,
// the form units leave and arrive in), the corpus, the data plane of the current plan, and the
// four things the controller asks of it — apply a plan (check it, connect the plan's data plane,
// move units as it says or restore them, load them into the compute, start its snapshots), compute
// a step (forward, backward, gradient synchronisation; the update waits), commit (AdamW) or
// discard, and save a dense checkpoint. Where the step runs — the host or a GPU — is the compute's
// (compute.h), chosen in init() from the worker's device; the Trainer never asks which.
// docs/dataplane.md describes the data planes, the restores and the snapshots it drives.
#pragma once

#include <zmq.hpp>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "comm/collectives.h"
#include "comm/store_client.h"
#include "comm/timed.h"
#include "core/result.h"
#include "model/data.h"
#include "model/model.h"
#include "model/params.h"
#include "model/routing_trace.h"
#include "plan/unit_writers.h"
#include "runtime/compute.h"
#include "runtime/dispatch.h"
#include "runtime/expert_grads.h"
#include "runtime/faults.h"
#include "runtime/groups.h"
#include "runtime/plan_times.h"
#include "runtime/slice_fetch.h"
#include "runtime/sparse_snapshots.h"
#include "runtime/standby_plane.h"
#include "ckpt/writer.h"
#include "runtime/train_spec.h"
#include "runtime/warm_up.h"
#include "wire/messages.h"

namespace sal::runtime {

// Where a worker's step time went (the health measurements, job/health.h): computing, or inside
// the data plane's collectives (waiting for the slowest peer, and the transfer).
struct StepTimes {
  double busy_ms = 0;      // computing: the step's time outside the collectives
  double exchange_ms = 0;  // in the forward and backward passes' collectives (the token all-to-alls)
  double sync_ms = 0;      // in the gradient synchronisation and the norm's all-reduce
  double update_ms = 0;    // the last commit's update (AdamW), reported with the next step
  // Outside the collectives: the step thread's CPU time, the CPU time of its experts in it
  // (stats.expert_rows rows), and the whole process's CPU time (its other threads' work too).
  double busy_cpu_ms = 0, expert_cpu_ms = 0, process_cpu_ms = 0;
  int64_t page_faults = 0;  // the step thread's, collectives included (comm::thread_page_faults)
};

struct StepOutcome {
  model::StepStats stats;
  double grad_norm = 0;
  double compute_ms = 0;
  double lr = 0;  // what commit() will apply
  StepTimes times;
  std::vector<wire::UnitDigest> digests;  // the held units' digests as the step began (trainer_digests.cpp)
  // A step of train.eval_every: the validation loss of the weights it began from, this rank's part
  // (its sequences of the validation set: the cross-entropy summed, the tokens).
  double val_ce_sum = 0;
  int64_t val_tokens = 0;
  uint64_t log_bytes = 0;  // the step's upstream log, put to the slice peers (0: none)
};

// Error::code() of a plan a worker could not apply because its dense restore could not read the
// snapshot it names (a unit file gone, damaged, or written at another step): PlanReady says so.
constexpr int kSnapshotUnreadable = 1;

// A degraded step's StepBegin (kept_step, kept_patch): the patch whose arrangement it keeps (patch
// 0: none, the step as the plan made it).
struct KeptPatch {
  uint64_t step = 0;
  uint32_t patch = 0;
};

class Trainer {
 public:
  // `cuda` opens a GPU for a "cuda:N" spec.device (empty: this build has no CUDA path).
  Trainer(zmq::context_t& ctx, TrainSpec spec, DeviceFactory cuda = {});
  ~Trainer();

  Status init();  // opens the compute (the host's, or GPU N for cuda:N), loads the corpus, sets BLAS threads
  // A CPU worker's warm-up pass while it waits for its first plan (warm_up.h); false: none (a GPU
  // worker, or train.warm_up = false).
  bool warms_up() const;
  Result<WarmUpDone> warm_up(const std::function<bool()>& stop) const;
  Status apply_plan(const wire::PlanUpdate& plan);
  // `shares`: each rank's part of the work in thousandths of an even part (StepBegin's; empty:
  // even): how many of the batch's sequences this rank computes and how the experts' tokens are
  // dispatched. A plan with data-parallel groups splits evenly. `kept`: a degraded step, which keeps
  // the arrangement of the last patch this rank computed (trainer_groups.cpp).
  Result<StepOutcome> step(uint64_t step, const std::vector<uint32_t>& shares = {}, KeptPatch kept = {});
  // Fails only where the compute's update can (a GPU's): the worker's state is then unusable.
  Status commit(uint64_t step);
  void discard();
  // `absent`: the plan's ranks that do not save (gone); the others write their units too.
  Result<uint32_t> save(const std::string& dir, uint64_t step, const std::vector<uint32_t>& absent = {});
  // The units this rank writes in a dense snapshot, as they are now (for an asynchronous
  // snapshot, between steps), from its compute (compute.h): the host's copies them here; a GPU's
  // starts their copy and the result waits for it (on the thread that calls it: the snapshot
  // writer's). It may be called after later steps and commits, and gives these units still. While
  // a GPU's previous snapshot has not been taken (its SnapshotUnits called or dropped), this waits.
  Result<ckpt::SnapshotUnits> snapshot_share(const std::vector<uint32_t>& absent = {});
  // `units`, which first passes the drill's snapshot fault point of `step` on the writer's thread
  // (after the copy, before anything is written: a writer dying in the middle of a snapshot).
  ckpt::SnapshotUnits with_snapshot_fault(ckpt::SnapshotUnits units, uint64_t step) const;
  // Each unit is in the snapshots of up to this many of its holders, so that a snapshot survives
  // the loss of one writer (ckpt/book.h).
  static constexpr size_t kSnapshotCopies = 2;

  // From another thread: ends the plan's data plane (and a rendezvous in progress) so a blocked
  // call returns; everything fails fast until clear_abort().
  void abort(const std::string& why);
  // From another thread: the controller abandoned plan `plan` (StepAbort.plan). A switch to it (or
  // to an older one) in progress stops at once, whatever part of it runs, and none is begun.
  void abandon(uint64_t plan, const std::string& why);
  bool abandoned(uint64_t plan) const { return plan <= abandoned_.load(); }
  // SPARe's patch of the step in flight (parallel.groups > 1; trainer_groups.cpp).
  // interrupt_for_patch(), from another thread: ends the plan's cross-group data plane, where the
  // step's synchronisation may wait for a rank that is gone, and this rank's group's plane when
  // the patch drops the group's work. patch(), on the training thread: starts the step's
  // synchronisation again from this group's own gradients (or none), computing the patch's extra
  // shard types first, over the patch's data plane.
  void interrupt_for_patch(const wire::StepPatch& p);
  Result<StepOutcome> patch(const wire::StepPatch& p);
  bool grouped() const { return role_.groups > 1; }
  // On the training thread, once the controller's abort has been handled.
  void clear_abort();

  // Where the last apply_plan() went (plan_times.h).
  PlanTimes plan_times() const { return plan_times_; }

  // A drill's fault: this worker dies when it reaches the point (faults.h), or, a corruption,
  // flips bits of a unit as the step begins (refused unless the job allows fault injection).
  void arm_fault(const wire::FaultArm& f);

  int rank() const { return rank_; }
  uint64_t plan() const { return plan_; }
  // The sparse snapshots (MoEtion) this worker holds (sparse_snapshots.h).
  SparseHeld sparse_held() const { return sparse_.held(); }
  // What the last apply_plan() met on the way that the controller should say (PlanReady.notes).
  const std::vector<std::string>& plan_notes() const { return plan_notes_; }
  // A sparse restore's replay in progress: the last iteration it replays (none: not replaying).
  std::optional<uint64_t> replaying_to() const { return replay_ ? std::optional<uint64_t>(replay_->to()) : std::nullopt; }
  // The steps committed into this worker's state (a plan's first step once it is applied, plus one
  // per commit), and the step whose gradients wait for a commit, if any.
  uint64_t steps_seen() const { return steps_seen_; }
  std::optional<uint64_t> pending() const { return have_grads_ ? std::optional<uint64_t>(step_) : std::nullopt; }

 private:
  // ---- applying a plan (trainer.cpp), in order ----
  Status switch_to(const wire::PlanUpdate& p);
  Status check_plan(const wire::PlanUpdate& p) const;
  Status still_wanted(const wire::PlanUpdate& p) const;  // not abandoned since the switch began
  Status leave_plan(const wire::PlanUpdate& p);
  Status connect(const wire::PlanUpdate& plan);
  Status choose_device_plane(comm::Collectives& c, const std::string& prefix);
  void take_roles(const wire::PlanUpdate& p);
  Status move_state(const wire::PlanUpdate& p, bool current);
  Status load_compute(const wire::PlanUpdate& p);
  void start_snapshots(const wire::PlanUpdate& p);
  // Whether the plan leaves this rank's compute as it is: the experts it holds, no transfer to or
  // from it, no restore (no download, no upload).
  bool compute_keeps(const wire::PlanUpdate& p) const;
  bool moves_experts_only(const wire::PlanUpdate& p) const;
  std::vector<model::UnitId> units_sent(const wire::PlanUpdate& p) const;
  DevicePlan compute_plan();
  // ---- moving state (trainer_state.cpp) ----
  Status migrate(const wire::PlanUpdate& plan);
  Status restore(const wire::PlanUpdate& plan);
  // The sparse rung: this rank's units from the window in the agents' memory (slice_fetch.h);
  // slot 0 is loaded and the rest replayed as the controller runs the window's iterations.
  // `current`: this worker's units hold the state of the plan's first step (state_step_).
  Status restore_from_peers(const wire::PlanUpdate& plan, bool current);
  Status restore_missing(const wire::PlanUpdate& p, const std::set<UnitId>& kept, const std::set<UnitId>& wanted);
  Result<FetchedWindow> fetch_from_peers(const wire::PlanUpdate& p, const std::set<UnitId>& units);
  Status rebuild_lost(const wire::PlanUpdate& p);
  Status rebuild_experts(const wire::PlanUpdate& p, const std::set<UnitId>& mine);
  Status share_rebuilt(const wire::PlanUpdate& p, const std::map<UnitId, std::vector<int>>& holders);
  Status rebuild_expert(const wire::PlanUpdate& p, const UnitId& id, const ckpt::UnitCopy& copy, uint64_t at,
                        const FetchedLogs& logs);
  // Experts the plan gives this rank that nothing brought: fresh from the seed (before any commit).
  Status add_new_experts(const wire::PlanUpdate& p);
  std::set<UnitId> units_held() const;  // the units the plan gives this rank (after apply_plan's held_)
  void install_unit(model::UnitId id, const std::vector<float>& packed);
  void keep_only(const std::vector<std::pair<int, int>>& held);
  // The units this rank writes (a snapshot's `copies` writers a unit, a sparse slot's and a
  // checkpoint's one): plan/unit_writers.h's share of this rank, the `absent` ranks left out.
  std::vector<const model::Unit*> units_written(size_t copies, const std::vector<uint32_t>& absent = {}) const;
  // A final checkpoint's: one copy of each unit, by one of its holders not `absent`.
  std::vector<const model::Unit*> checkpoint_share(const std::vector<uint32_t>& absent = {}) const;
  // The plan's ranks the patches of this plan lost (not in the last patch's ranks): a degraded
  // step's sparse slots are written without them, from the next window on (writers_absent_).
  std::vector<uint32_t> ranks_lost() const;
  void write_without_lost();
  // The slice endpoints of `peers` (the plan's slice_nodes).
  std::vector<wire::SliceNode> slice_route(const wire::SlicePeers& peers) const;
  // ---- digests and a drill's corruption (trainer_digests.cpp) ----
  bool digests_due(uint64_t step) const;
  std::vector<wire::UnitDigest> unit_digests(uint64_t step);
  void corrupt_if_armed(uint64_t step);
  // ---- the step ----
  Status open_compute();
  Status replayed(uint64_t step);  // a sparse window's replay after `step`'s update
  // parallel.groups > 1 (trainer_groups.cpp): this rank's group's data plane, the step of a grouped
  // plan (groups.h), and the synchronisation it ends with, over a data plane and replica table.
  Status connect_group(const wire::PlanUpdate& p);
  comm::GlooOptions plane_options(int rank, int size, std::string prefix) const;
  std::unique_ptr<comm::StoreClient> store_client(const std::string& endpoint) const;
  Result<StepOutcome> grouped_step(uint64_t step, int64_t t0);
  Result<StepOutcome> degraded_step(uint64_t step, int64_t t0, const wire::StepPatch& p);
  Result<const wire::StepPatch*> kept_patch(uint64_t step, KeptPatch kept) const;
  bool validates(uint64_t step) const;
  Result<model::StepStats> validate(uint64_t step, const wire::StepPatch* kept);
  Result<model::StepStats> validate_in_groups(uint64_t step, const std::vector<uint32_t>& damaged);
  Result<model::StepStats> forward_backward(uint64_t step, const std::vector<uint32_t>& shares);
  StepTimes step_times(const StepOutcome& out, const comm::WaitClock& w0, int64_t cpu0, int64_t proc0, double exchange,
                       double sync) const;
  Status compute_types(uint64_t step, const std::vector<uint32_t>& types, model::StepStats& total);
  Status compute_part(uint64_t step, const std::string& what, std::pair<int, int> group_part, model::StepStats& total);
  Status compute_patch_types(uint64_t step, const wire::StepPatch& p, model::StepStats& total);
  Status patch_compute(const wire::StepPatch& p, model::StepStats& total);
  Result<std::optional<comm::GlooOptions>> rejoin_options(const wire::StepPatch& p, const std::string& prefix) const;
  Status rejoin_degraded(const wire::StepPatch& p, std::unique_ptr<comm::Collectives> rejoin);
  // The arrangement the step computes in: a degraded step's after a patch some groups rejoin, else
  // the plan's.
  const GroupRole& role_now() const { return degraded_role_ ? *degraded_role_ : role_; }
  Result<StepOutcome> finish_grouped(comm::Collectives& comm, const std::vector<Counts>& replicas,
                                     const std::vector<SharedExpert>& shared,
                                     model::StepStats total, int64_t t0);
  Status backup_grads();
  // SPARe's standby plane (standby_plane.h): started once a grouped plan that can be patched is in
  // place (or kept with the plan's planes); a patch narrows it where every rank of the patch holds it.
  void keep_or_retire_standby(const wire::PlanUpdate& p);
  void start_standby(const wire::PlanUpdate& p);

  zmq::context_t& ctx_;
  // The sparse snapshots' puts and the restores' fetches move megabytes a step: they have a ZeroMQ
  // I/O thread of their own, so the worker's reports to its agent (ctx_'s) never queue behind them.
  zmq::context_t slices_ctx_{1};
  TrainSpec spec_;
  model::Corpus corpus_;
  std::unique_ptr<model::RoutingTrace> routing_;  // model.routing_trace, or null
  model::Params params_;
  std::shared_ptr<comm::StoreClient> store_;     // atomic access: abort() reads it from another thread
  std::shared_ptr<comm::Collectives> comm_;      // likewise
  // The time the step thread spends in its data planes' collectives (every plane is comm::timed).
  std::shared_ptr<comm::WaitClock> waits_ = std::make_shared<comm::WaitClock>();
  double update_ms_ = 0;                         // the last commit's update
  std::shared_ptr<comm::Collectives> group_comm_;  // likewise; a grouped plan's: this rank's group only
  // The plan's plane a patch replaced in comm_: kept (aborted) until the next plan, since the
  // compute's plan still names it (DevicePlan::comm), so a use fails instead of reading freed memory.
  std::shared_ptr<comm::Collectives> spent_plane_;
  // Who each plane connects, in rank order, and under which plan it was connected: a later plan
  // keeps an intact plane of the same ranks (PlanUpdate.keep_planes_of) instead of connecting one.
  struct PlaneOf {
    uint64_t plan = 0;
    std::vector<std::pair<uint32_t, uint32_t>> ranks;  // (node, index)
    bool operator==(const PlaneOf&) const = default;
  };
  PlaneOf plane_of_, group_plane_of_, standby_of_;
  std::unique_ptr<StandbyPlane> standby_;  // the plan's (the step thread's only)
  StandbyYard standby_yard_;                // stopped standbys whose threads may still end
  std::vector<std::pair<uint32_t, uint32_t>> plan_ranks_;  // the plan's ranks (a patch names them by index)
  // `held`, when the plan may keep it and it is intact and connects `want`'s ranks.
  static bool keeps(const wire::PlanUpdate& p, const std::shared_ptr<comm::Collectives>& held, const PlaneOf& of,
                    const PlaneOf& want);
  GroupRole role_;                               // this rank's group in the plan (groups.h)
  std::atomic<int64_t> group_now_{-1};           // role_.span.group while grouped, for interrupt_for_patch()
  // A grouped step's stats of its own shard types before the synchronisation, and whether the
  // compute set their gradients aside (backup_grads): what a patch starts again from.
  model::StepStats group_stats_;
  bool backup_ok_ = false;
  // The last patch this rank computed under the plan in force: degraded steps keep its arrangement
  // and its data plane (comm_ since).
  std::optional<wire::StepPatch> last_patch_;
  // Where last_patch_ has groups rejoin the degraded steps (StepPatch.rejoin): their arrangement
  // (rejoined_role); reset by a new plan and by the next patch.
  std::optional<GroupRole> degraded_role_;
  std::vector<uint32_t> writers_absent_;         // the ranks the sparse slots of this window leave out
  std::vector<wire::SliceNode> slice_nodes_;     // the plan's slice endpoints (every node's)
  std::atomic<bool> aborting_{false};
  std::atomic<uint64_t> abandoned_{0};           // the newest plan the controller abandoned
  std::atomic<uint64_t> applying_{0};            // the plan apply_plan() is switching to (0: none)
  std::vector<Counts> replicas_;                 // [layer] -> R[e][rank]
  plan::ExpertHolders holders_;                  // [layer][expert] -> the ranks holding it (who writes what)
  std::vector<std::pair<int, int>> held_;        // (layer, expert) per slot of this rank
  std::vector<SharedExpert> shared_;             // the plan's experts held by two or more ranks
  int rank_ = -1, ranks_ = 0;
  uint64_t plan_ = 0;                            // 0 until a plan is fully applied
  bool keep_ = false;                            // the plan being applied leaves the compute as it is
  bool moves_only_ = false;                      // or only moves experts to and from it
  bool pruned_ = false;                          // units outside the plan dropped yet
  double last_norm_ = 0;
  // The step's loads of the experts over the global batch (moe-llama's routing bias): what the
  // commit moves the bias by (model/router_bias.h; empty without a bias).
  model::RouterLoad router_load_;
  PlanTimes plan_times_;
  bool have_grads_ = false;
  uint64_t step_ = 0;                            // the step being computed (fault points name it)
  uint64_t steps_seen_ = 0;                      // steps committed into the state (steps_seen())
  // The step whose state this worker's units hold, host and compute alike, where that is sure: not
  // while a switch or an update changes them (one abandoned half way leaves it unset), nor while a
  // sparse window replays. A restore from a window of that very step keeps them (restore_from_peers).
  std::optional<uint64_t> state_step_;
  std::shared_ptr<FaultInjector> faults_ = std::make_shared<FaultInjector>();  // the snapshot writer's thread too
  DeviceFactory cuda_;
  std::unique_ptr<Compute> compute_;             // set once in init(), before any abort can come
  // This plan's device data plane (every rank on a GPU of its own; "": none), whether it is the one
  // the compute holds, and the ranks' device keys of this plan's plane and of the one held.
  std::string device_prefix_;
  bool reuse_plane_ = false;
  std::vector<std::string> plan_keys_;
  std::vector<std::string> plane_keys_;
  SparseSnapshots sparse_;                       // the checkpoint schedule acted on (after compute_: stops first)
  std::optional<ckpt::WindowReplay> replay_;     // a sparse restore being replayed
  std::vector<std::string> plan_notes_;
};

}  // namespace sal::runtime
