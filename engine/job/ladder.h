// ladder.h — the recovery ladder: after a loss, which workers the next plan uses and which rung
// brings the model's state back, cheapest first. Each rung says when it applies and what it costs.
//
//   1. patch (SPARe, parallel.groups > 1): a rank lost in the middle of a step; surviving
//      data-parallel groups compute the lost group's shard types and the step commits. Decided
//      by the driver on the loss itself (driver_patch.cpp), before any plan: choose_workers()
//      never returns it. A wipe-out aborts the step and the rungs below apply.
//   2. elastic (Lazarus): every unit of the model still has a holder among the workers used: the
//      survivors re-plan and fetch the lost replicas from surviving ones. Costs the step in
//      flight, no committed step.
//   3. rebuild (MoEtion's upstream logging, for experts): only experts lost every holder, the
//      plan in force ran every iteration since a complete window of sparse snapshots in the
//      agents' memory began, and the workers logged what they dispatched (train.expert_logs): the
//      survivors re-plan as in 2, and one new holder of each lost expert loads its full copy from
//      the window, replays its own updates from the logs and sends it to the others. Nobody rolls
//      back, no step runs again.
//      A rebuild that fails (a log missing or damaged) falls to the next rung.
//   4. sparse (MoEtion): some unit lost every holder and a complete window of sparse snapshots in
//      the agents' memory covers the whole model (peer_windows.h): every rank loads its units from
//      the window, replays it with the operators not yet loaded in full frozen, and re-executes the
//      steps after it; nothing committed is lost (the replay reproduces it). Taken when it is at
//      least as new as the dense snapshot (a newer dense snapshot re-runs fewer steps).
//   5. dense: restore the newest complete dense snapshot on disk; the committed steps after it run
//      again (they count as lost).
//   6. seed: no snapshot yet: start again from the job's seed; every committed step is lost.
//
// Which workers a plan uses, and when a restore is forced regardless of what survives, is the
// job's train.recovery mode:
//
//   elastic (Salamander): every ready worker; the ladder as above.
//   fixed-ep-ft (the DeepSpeed-FT baseline): whole expert-parallel groups only (plan/fixed_ep.h);
//     no restore while one whole group of the plan in force survives, a restore otherwise.
//   checkpoint-restart (the DeepSpeed-MoE baseline): whole groups; any change of the workers in
//     use — a loss, or a join that adds a group — restarts from the last checkpoint, as a
//     torchelastic re-rendezvous does.
//
// Before the first committed step nothing is ever restored (the state is the seed's).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "job/plan_switch.h"

namespace sal::job {

enum class Rung : uint8_t { patch, elastic, rebuild, sparse, dense, seed };
const char* rung_name(Rung r);

struct WorkerChoice {
  std::vector<Participant> use;  // the plan's workers; empty: too few for one EP group
  Rung rung = Rung::elastic;     // elastic, or the restore rung the state needs
  std::string why;               // why a restore, or why no plan
  bool restore() const { return rung != Rung::elastic && rung != Rung::patch; }
};

// What the restoring rungs have to offer: the newest complete dense snapshot's step, and the last
// iteration of the newest sparse window in peers' memory that covers the model, if any — asked
// only when a unit is lost (finding it reads every agent's report).
struct Restorable {
  std::optional<uint64_t> dense_step;
  std::function<std::optional<uint64_t>()> sparse_to;
  // Whether the state `lost` names can be rebuilt expert by expert (the rebuild rung); unset: no.
  std::function<bool(const std::vector<std::string>& lost)> rebuild;
};

// `ep` is the EP group size (ignored by elastic); `ready` sorted; `step` the next step.
WorkerChoice choose_workers(const std::string& mode, uint32_t ep, const std::vector<Participant>& ready,
                            const std::optional<AppliedPlan>& applied, uint64_t step, const Restorable& have);

// The cheapest rung that restores what `lost` names (units without a holder) given what there is
// to restore from; elastic when nothing is lost.
Rung restore_rung(const std::vector<std::string>& lost, const Restorable& have);

// A restore whatever is lost: the newest dense snapshot, else the seed.
Rung forced_restore(const Restorable& have);

}  // namespace sal::job
