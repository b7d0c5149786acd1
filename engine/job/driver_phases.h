// driver_phases.h — the job driver's phases (driver.h) as values: each alternative of State holds
// what only that phase needs, and is gone when the phase ends. The transition table
// (driver_table.cpp) lists, for each phase and event, the handler that runs and the phases it may
// move to.
//
//   gathering    waiting for the job's workers (mesh.nodes x devices), or mesh.join_window_ms
//                after the first one
//   reconciling  a job resumed from its journal waiting for its plan's ranks (at most the join window)
//   deciding     the planner was asked for a plan (act::DecidePlan) and has not answered
//   switching    the plan's PlanUpdate went to its ranks; waiting for each to answer PlanReady
//   retrying     a pause before planning again, after a failed plan or an aborted step
//   running      a plan in force: steps, one at a time (with SPARe's patch of the step in flight)
//   saving       every rank writes its share of the final checkpoint
//   done, failed the job is over
//
// Outside the table (tests, the run record, the metrics) the coarse Phase is what is seen:
// reconciling counts as gathering; deciding, switching and retrying as planning.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "core/ids.h"
#include "job/digests.h"
#include "job/ladder.h"
#include "job/health.h"
#include "job/plan_switch.h"
#include "plan/plan.h"

namespace sal::job {

enum class Phase : uint8_t { gathering, planning, running, saving, done, failed };
const char* phase_name(Phase p);

namespace phase {

// A window of time the driver waits out (the first plan's join window): when it began (0: not
// yet) and whether its timer fired.
struct Window {
  int64_t since_ns = 0;
  bool over = false;
};

struct Gathering {
  Window join;
};

struct Reconciling {
  Window join;
};

struct Deciding {
  uint64_t decision = 0;
  std::string why;
  WorkerChoice choice;
  uint64_t step = 0;
  Epoch epoch = 0;
  bool must_switch = false;  // the data plane in force is spent: even the same placement is switched to
};

struct Switching {
  uint64_t number = 0;
  uint64_t step = 0;
  std::vector<Participant> ranks;
  plan::Plan plan;
  PlanSwitch sw;
  std::set<Participant> waiting;
  std::string reason;
  int64_t started_ns = 0;
  double slowest_connect_ms = 0, slowest_migrate_ms = 0;  // each over the workers
  std::vector<double> fetch_s;  // a replica's fetch, per worker that received experts only (its migration over them)
  std::optional<Rung> restore;  // restores instead of moving state
  std::string restore_from;
  std::string restore_dir;  // a dense restore's snapshot
  std::optional<uint64_t> restore_window;  // a sparse restore's window (its first and last iterations)
  std::optional<uint64_t> restore_to;
  bool snapshot_unreadable = false;  // a rank could not read restore_dir (PlanReady said so)
};

// What the retry timer does when it fires: plan again after an aborted step (counting the
// step's failures), after a failed plan, or after a loss seen between steps (settling).
struct Retrying {
  bool after_abort = false;
  std::string why;
  std::vector<Participant> ranks;  // the aborted step's (sorted)
  uint64_t step = 0;
  std::set<Participant> lost;      // a patched step's losses: all seen gone before planning
  bool settling = false;           // the cause is seen; a restore waits for the windows' reports
};

// The step in flight's votes, summed.
struct Tally {
  uint64_t step = 0;
  double ce = 0, aux = 0, grad_norm = 0, lr = 0, compute_ms = 0;
  uint64_t tokens = 0;
  std::vector<uint64_t> loads;
  int64_t begun_ns = 0;
  std::set<Participant> voted;  // whose measurements the tally holds
  std::map<Participant, WorkerTimes> times;  // where each one's time went (health.h)
  DigestVotes digests;  // each one's unit digests (digests.h), when it sent any
  // A step of train.eval_every: each one's part of the validation loss (cross-entropy summed, tokens),
  // summed in participant order at the commit (the same votes give the same loss).
  std::map<Participant, std::pair<double, uint64_t>> validation;
};

// The step in flight's patch (SPARe): who it lost, the groups whose work it drops, the patches
// sent so far, and the policy decision awaited.
struct Patching {
  uint64_t step = 0;
  uint32_t sent = 0;
  std::set<Participant> lost;
  std::set<uint32_t> damaged;
  std::optional<uint64_t> deciding;
  std::vector<Participant> left;  // the last patch's ranks, in plan order
  plan::AfterPatch after = plan::AfterPatch::cheaper;  // the redundancy policy's word on what follows
  std::vector<uint32_t> rejoin;  // the last patch's (wire::StepPatch.rejoin)
};

// After a patched step commits, unless the redundancy policy regroups at once: the steps that train
// on with the damaged groups out (SPARe's degraded steps), keeping that patch's arrangement (its
// ranks, the extra shard types it gave each group, its data plane) until the next plan.
struct Degraded {
  uint64_t step = 0;   // the patched step
  uint32_t patch = 0;  // which of its patches the steps keep
  std::set<Participant> lost;
  std::set<uint32_t> damaged;
  std::vector<Participant> ranks;  // the plan's ranks still in, in plan order
  plan::AfterPatch after = plan::AfterPatch::cheaper;
  double normal_ms = 0;   // the median step time before the patch
  double regroup_ms = 0;  // a regrouped plan's step, estimated: normal_ms x the plan's ranks / those left
  double lost_ms = 0;     // what the degraded steps took over regroup_ms, summed (what they took under it off, to 0)
  uint32_t steps = 0;     // degraded steps committed
  std::vector<uint32_t> rejoined;  // damaged groups whose ranks left compute on (wire::StepPatch.rejoin)
};

struct Running {
  Tally tally;
  std::optional<Patching> patch;
  std::optional<Degraded> degraded;
  Window joins;  // workers that are not ranks were first seen ready (joins wait mesh.join_batch_ms)
};

struct Saving {
  std::set<Participant> waiting;
  uint32_t units = 0;
  std::string dir;
  std::string done;        // what the job's end says once it is written
  bool after_stop = false; // a stop's save (a failed one then does not fail the job)
  uint32_t attempt = 0;    // a saver lost meanwhile: the workers left write it again (start_save)
  // Answers still to come to an earlier try, per saver (a worker answers its saves in order): they
  // are not this try's.
  std::map<Participant, uint32_t> stale;
};

struct Done {
  std::string checkpoint_dir;  // the final checkpoint ("": none was written)
};

struct Failed {
  std::string why;
};

}  // namespace phase

using State = std::variant<phase::Gathering, phase::Reconciling, phase::Deciding, phase::Switching, phase::Retrying,
                           phase::Running, phase::Saving, phase::Done, phase::Failed>;

// The coarse phase of a state (by its index in State).
Phase coarse_phase(size_t state_index);
inline Phase coarse(const State& s) { return coarse_phase(s.index()); }
// "gathering", "reconciling", "deciding", ... for the debug trace.
const char* state_name(const State& s);

}  // namespace sal::job
