// driver_io.h — what goes into the job driver (driver.h) and what comes out: events in, actions out.
//
// Events are what the controller observed: the membership it now sees (a View), a node or worker
// gone, the workers' messages (votes, plan readiness, saves — as the protocol carries them), the
// answer to a plan decision the driver asked for, a timer the driver armed, an operator's request,
// the job stopping. Each carries the monotonic time it happened; the driver reads no clock.
//
// Actions are what the controller must do for the driver: send a protocol message to some nodes
// (or to every node), ask the planner for a plan, arm or cancel one of the driver's timers, log an
// event, record the run (its timeline, committed steps, plans in force, recoveries), erase a
// plan's rendezvous keys, mark or drop a snapshot on disk, stop the job. The controller applies
// them in order and touches nothing of the driver's state.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "ckpt/book.h"
#include "core/ids.h"
#include "core/result.h"
#include "job/journal.h"
#include "job/measurements.h"
#include "job/plan_switch.h"
#include "plan/plan.h"
#include "policy/decision.h"
#include "policy/plan_ask.h"
#include "wire/messages.h"

namespace sal::job {

// What a worker reports it holds (WorkerInfo): the plan it applied, the steps its state has seen
// committed, and the step whose gradients wait for a commit (with the epoch it began in).
struct Holding {
  uint64_t plan = 0;
  uint64_t steps = 0;
  std::optional<uint64_t> pending;
  Epoch pending_epoch = 0;
  bool operator==(const Holding&) const = default;
};

// The membership as the driver sees it.
struct View {
  Epoch epoch = 0;
  std::vector<Participant> ready;  // ready workers of usable nodes, sorted (node, index)
  // Before any plan: when every worker that was started has exited and one of them failed, why
  // ("worker 0.0 exited with code 1: ..."); empty otherwise.
  std::string start_failure;
  // What each ready worker holds; only while the driver reconciles a resumed job (wants_holdings()).
  std::map<Participant, Holding> held;
  // The live nodes' slice endpoints (where sparse snapshots are held: wire::SliceNode).
  std::map<NodeId, wire::SliceNode> slices;
  // The rack of each live node the job names in mesh.racks (its agent's --name there).
  std::map<NodeId, std::string> racks;
  // The CPUs a live node's workers share with other nodes' workers of the job: its host, where its
  // workers are not confined to CPU quotas of their own (--cpu-share); absent where they are. The
  // speed watch does not weigh one worker's share of such CPUs against its pool-mates' (the
  // host's scheduler shares them out, job/health.h).
  std::map<NodeId, std::string> cpu_pools;
  bool operator==(const View&) const = default;
};

// What a plan decision produced (the planner's answer to act::DecidePlan).
using PlanRecord = policy::PlanRecord;

// The driver's timers. Each is armed (again) or cancelled by an action and comes back as an event.
enum class Timer : uint8_t {
  gate,   // the first plan's join window
  plan,   // a plan switch (or the final save) must finish by then
  retry,  // the pause before planning again after a failed plan or an aborted step
  join,   // joins are batched this long before a re-plan
  soon,   // a deferred look at the state (an operator's request is not handled inside the call)
  capacity,  // waiting for workers enough to plan: the job ends when this fires
  count_
};
const char* timer_name(Timer t);

namespace in {

struct Membership { View view; };
// A node (every worker of it) or one worker is gone: aborts a step it takes part in. A Membership
// event with the new view follows.
struct Lost {
  NodeId node = kNoNode;
  std::optional<uint32_t> worker;
  std::string cause;
};
struct Vote { wire::StepVote vote; };
struct Ready { wire::PlanReady ready; };
struct Saved { wire::SaveDone done; };
struct Decided {
  uint64_t decision = 0;  // the number act::DecidePlan carried
  Result<PlanRecord> record;
};
struct TimerFired { Timer timer; };
// The redundancy policy's stacks for the groups still in the step (act::DecidePatch's answer), and
// which generation decided them.
struct PatchDecided {
  uint64_t decision = 0;
  Result<plan::ShardStacks> stacks;
  std::string decided_by;
};
// The health policy's answer to act::DecideHealth: each worker's share of the work, which to drain.
struct HealthDecided {
  uint64_t decision = 0;
  policy::HealthProposal proposal;
  std::string decided_by;
};
// What an agent holds of the sparse snapshots (and what it refused), as it reported it.
struct Slices { wire::SliceReport report; };
// An operator (job.rebalance(), policy.load) or the job's own schedule wants a new plan.
struct PlanRequest {
  std::string why;
  bool use_loads = false;
};
// The job is to end. With `save` (a user's stop: job.stop(), Ctrl-C, a drill's end), a running job
// first aborts the step in flight and writes the final checkpoint, then answers StopJob; without
// it (or where nothing can be saved: no plan in force yet, no run directory) it just stops.
struct Stop {
  std::string why;
  bool save = false;
};

}  // namespace in

using Event = std::variant<in::Membership, in::Lost, in::Vote, in::Ready, in::Saved, in::Decided, in::TimerFired,
                           in::PlanRequest, in::Stop, in::Slices, in::PatchDecided, in::HealthDecided>;

struct Input {
  int64_t now_ns = 0;  // CLOCK_MONOTONIC when it happened
  Event what;
};

namespace act {

using Message = std::variant<wire::StepBegin, wire::StepCommit, wire::StepAbort, wire::PlanUpdate, wire::SaveCheckpoint,
                             wire::StepPatch>;
// To these nodes (those still reachable: live or draining); with `all`, to every reachable node.
struct Send {
  std::vector<NodeId> to;
  bool all = false;
  Message msg;
};
// Ask the planner for the plan `PlanAsk` says; the answer comes back as in::Decided with the same
// `decision`.
struct DecidePlan : policy::PlanAsk {
  uint64_t decision = 0;
};
// Ask the redundancy policy which groups compute which shard types when the groups not `alive`
// drop out of the step in flight (SPARe's reordering, with the plan in force's stacks as the
// current ones); the answer comes back as in::PatchDecided with the same `decision`.
struct DecidePatch {
  uint64_t decision = 0;
  std::vector<bool> alive;
  plan::ShardStacks current;
};
// Ask the health policy what to do about the workers' speeds (the answer: in::HealthDecided with
// the same `decision`).
struct DecideHealth {
  uint64_t decision = 0;
  policy::HealthInput input;
};
// The node leaves the job gracefully (the health policy drained it): the controller tells its agent
// to drain; the driver re-plans when its workers leave the view.
struct Drain {
  NodeId node = kNoNode;
  std::string why;
};
struct ArmTimer {
  Timer timer;
  uint64_t ms = 0;
};
struct CancelTimer { Timer timer; };
enum class Level : uint8_t { info, warn, error };
// An event for the log (events.csv, job.events()) and a log line at `level` (none when `quiet`);
// with no kind, only the log line.
struct Note {
  std::string kind;
  std::string detail;
  Level level = Level::info;
  bool quiet = false;
  NodeId node = kNoNode;  // the node it is about, when it is about one (events.csv's node column)
};
// The run record (run_record.h): the driver's phase changed; a step committed; a plan is in force;
// a recovery ended; committed steps will run again; a restore finished.
struct Phase {
  std::string name;  // compute, reconfigure, restore, wait, save, or "" when the run is over
  std::string detail;
};
struct StepDone {
  StepRecord record;
  // The step's global token-to-expert counts, [layer][expert] flattened, when train.record_routing
  // asks for this step's (RUN/routing/); else empty.
  std::vector<uint64_t> routing;
};
struct PlanInForce {
  AppliedPlan plan;
  std::vector<std::vector<double>> loads;
};
struct RecoveryDone { RecoveryRecord record; };
struct StepsLost { uint64_t steps = 0; };
struct Restored {};
// The rendezvous keys of plan-<plan>/ are done with; `closed`: the plan is over for good (abandoned,
// or replaced by a newer one in force), and a late request under its prefix is refused at once —
// under its standby plane's too (wire::standby_keys), which are left alone until then.
struct EraseKeys {
  uint64_t plan = 0;
  bool closed = false;
  std::string under;  // only the keys under plan-<plan>/<under>/ (a patch's: wire::patch_keys); "": all
};
// A dense snapshot is complete (the controller writes its marker), or dropped from disk.
struct SnapshotComplete { ckpt::Snapshot snapshot; };
// Every rank wrote its share of the final checkpoint: its manifest (written last: a checkpoint
// with one is complete) names the step and the units.
struct CheckpointComplete {
  std::string dir;
  uint64_t step = 0;
  uint32_t units = 0;
};
struct SnapshotDrop { std::string dir; };
// A step committed (after its record): drills watch this. The driver looks at the state again at
// its next turn (Timer::soon), so what the hooks change is seen before the next step begins.
struct Committed { StepId step = 0; };
struct StopJob { std::string why; };    // the job is over (done or failed): stop it
// A journal record (job/journal.h); with `sync`, durable (fsync) before the next action is applied.
struct Journal {
  Record record;
  bool sync = false;
};

}  // namespace act

using Action = std::variant<act::Send, act::DecidePlan, act::DecidePatch, act::ArmTimer, act::CancelTimer, act::Note, act::Phase,
                            act::StepDone, act::PlanInForce, act::RecoveryDone, act::StepsLost, act::Restored,
                            act::EraseKeys, act::SnapshotComplete, act::CheckpointComplete, act::SnapshotDrop, act::Committed, act::StopJob,
                            act::Journal, act::DecideHealth, act::Drain>;

// One line of each, for the controller's debug trace ("vote 1.0 step 12 yes", "send plan_update to 4").
std::string describe(const Event& e);
std::string describe(const Action& a);

}  // namespace sal::job
