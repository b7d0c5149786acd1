// messages.h — every control message of the Salamander protocol (docs/protocol.md is the spec).
//
// Each message is a plain struct whose fields are written once, in wire order, with SAL_WIRE_FIELDS
// (fields.h): type, name, default and an optional bound (max bytes of a string, max elements of a
// list). The codec (codec.h) uses that one list to encode, to decode with bounds checks, and to
// name the exact field in an error ("Heartbeat.workers[2].pid: expected uint, got str"). Enums travel as uint8
// and are range-checked against their `count_` member. Value types that live outside the wire
// (the plan, plan/plan.h) travel as they are: plan_fields.h gives their field lists.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "wire/fields.h"
#include "wire/message_types.h"
#include "wire/plan_fields.h"
#include "wire/slice_messages.h"

namespace sal::wire {

// What a worker's model state has seen: the plan it applied last, the steps committed into it, and
// the step whose gradients wait for a commit (-1: none) with the epoch that step began in. A
// restarted controller reconciles with it (job/driver.h).
struct Holding {
  SAL_WIRE_FIELDS(
    (uint64_t, plan, 0),
    (uint64_t, steps, 0),
    (int64_t, pending, -1),
    (uint64_t, pending_epoch, 0))
};

struct WorkerInfo {
  SAL_WIRE_FIELDS(
    (uint32_t, index, 0),
    (std::string, device, {}, kNameMax),
    (uint32_t, pid, 0),
    (WorkerState, state, WorkerState::starting),
    (Holding, held, {}))
};

struct RegisterNode {
  static constexpr MsgType kType = MsgType::register_node;
  SAL_WIRE_FIELDS(
    (std::string, name, {}, kNameMax),
    (std::string, host, {}, kNameMax),
    (uint32_t, pid, 0),
    (std::vector<std::string>, devices, {}, kListMax),
    (std::string, build, {}, kNameMax),
    // The id this agent had under a controller that restarted (UINT32_MAX: none); a resumed
    // controller gives it back when its journal knows it, so the plan's ranks stay valid.
    (uint32_t, previous_id, UINT32_MAX),
    // Where the agent holds other workers' sparse snapshots (its slice endpoint, SliceNode), and the
    // CURVE public key of that endpoint ("" where it is local).
    (std::string, slice_endpoint, {}, kNameMax),
    (std::string, slice_key, {}, kNameMax))
};

struct Welcome {
  static constexpr MsgType kType = MsgType::welcome;
  SAL_WIRE_FIELDS(
    (uint32_t, node_id, 0),
    (uint64_t, epoch, 0),
    (uint32_t, heartbeat_ms, 0),
    (uint32_t, miss_limit, 0),
    (std::string, job, {}, kNameMax),
    (uint32_t, grace_ms, 0),  // how long the agent rides out a silent controller (mesh.controller_grace_ms)
    // The public keys (Z85) the mesh admits as nodes — the job's agents, whose workers use their
    // agent's key: the only clients an agent's slice endpoint admits (empty where the mesh is local).
    (std::vector<std::string>, node_keys, {}, kListMax),
    // How often the agent starts a new worker in the place of one of its own that crashed after it
    // was ready, per device (mesh.worker_restarts; 0: never).
    (uint32_t, worker_restarts, 0))
};

struct Heartbeat {
  static constexpr MsgType kType = MsgType::heartbeat;
  SAL_WIRE_FIELDS(
    (uint32_t, node_id, 0),
    (uint64_t, seq, 0),
    (std::vector<WorkerInfo>, workers, {}, kListMax))
};

struct Ping {
  static constexpr MsgType kType = MsgType::ping;
  SAL_WIRE_FIELDS(
    (uint64_t, epoch, 0),
    (uint64_t, step, 0),
    (uint64_t, seq, 0))
};

struct WorkerEvent {
  static constexpr MsgType kType = MsgType::worker_event;
  SAL_WIRE_FIELDS(
    (uint32_t, node_id, 0),
    (uint32_t, index, 0),
    (WorkerEventKind, kind, WorkerEventKind::started),
    (uint32_t, pid, 0),
    (int32_t, exit_code, 0),
    (int32_t, signal, 0),
    (std::string, detail, {}, kTextMax))
};

struct Goodbye {
  static constexpr MsgType kType = MsgType::goodbye;
  SAL_WIRE_FIELDS(
    (uint32_t, node_id, 0),
    (std::string, reason, {}, kTextMax))
};

struct Command {
  static constexpr MsgType kType = MsgType::command;
  SAL_WIRE_FIELDS(
    (Verb, verb, Verb::stop),
    (std::string, reason, {}, kTextMax))
};

// One held unit's digest (core/digest.h) in a vote: `unit` is its index in the model's canonical
// order (core/model_shape.h model_units), `digest` that of its weights and both moments.
struct UnitDigest {
  SAL_WIRE_FIELDS(
    (uint32_t, unit, 0),
    (uint64_t, digest, 0))
};

struct StepBegin {
  static constexpr MsgType kType = MsgType::step_begin;
  SAL_WIRE_FIELDS(
    (uint64_t, epoch, 0),
    (uint64_t, step, 0),
    (uint64_t, plan, 0),  // the plan the step runs under: workers that are not its ranks do not vote
    // Each plan rank's share of the step's work in thousandths of an even part (the health
    // policy's: fewer sequences of the batch, fewer of an expert's tokens); empty: even shares.
    (std::vector<uint32_t>, shares, {}, kListMax * 16),
    // 0: the step runs as the plan made it. N: it keeps the arrangement of patch N of step
    // `kept_step` (SPARe's degraded steps, after a patched step commits): that patch's ranks, the
    // groups it dropped (their ranks only synchronise), the extra shard types it gave each group,
    // and its data plane.
    (uint64_t, kept_step, 0),
    (uint32_t, kept_patch, 0))
};

// A worker's vote on a step, with what it measured: the controller commits when every participant
// voted yes, and keeps the numbers for metrics and for balancing expert loads.
struct StepVote {
  static constexpr MsgType kType = MsgType::step_vote;
  SAL_WIRE_FIELDS(
    (uint32_t, node_id, 0),
    (uint32_t, index, 0),
    (uint64_t, epoch, 0),
    (uint64_t, step, 0),
    (bool, ok, false),
    (std::string, detail, {}, kTextMax),
    (double, ce_sum, 0),                            // cross-entropy summed over the worker's tokens
    (double, aux, 0),                               // the balancing loss (global, the same on every worker)
    (uint64_t, tokens, 0),                          // the worker's tokens this step
    (double, grad_norm, 0),                         // global gradient norm (the same on every worker)
    (double, lr, 0),                                // the learning rate the commit will apply
    (double, compute_ms, 0),                        // the worker's time for forward, backward and gradient sync
    (std::vector<uint32_t>, loads, {}, kLoadsMax),  // token-to-expert assignments, [layer][expert] flattened
    // The sparse snapshots (MoEtion) the worker holds after its last commit: bytes, the newest
    // complete window's iterations (-1: none yet), and the last slot's copy time and bytes.
    (uint64_t, sparse_bytes, 0),
    (int64_t, sparse_from, -1),
    (int64_t, sparse_to, -1),
    (double, sparse_copy_ms, 0),
    (uint64_t, sparse_slot_bytes, 0),
    (uint32_t, patch, 0),                           // the StepPatch this vote answers (0: the step as begun)
    // Where the worker's time went (runtime/trainer.h StepTimes; the health measurements):
    // computing, in the passes' token exchanges, in the gradient sync, and the last commit's update.
    (double, busy_ms, 0),
    (double, exchange_ms, 0),
    (double, sync_ms, 0),
    (double, update_ms, 0),
    // Outside the collectives, CPU time (0: not measured): the step thread's, of it its experts'
    // (expert_rows rows), and the whole process's (its other threads' work too).
    (double, busy_cpu_ms, 0),
    (double, expert_cpu_ms, 0),
    (uint64_t, expert_rows, 0),
    (double, process_cpu_ms, 0),
    // The digests of the units the worker holds, taken as the step began (before its gradients
    // left it); the controller compares every unit's across its holders (job/digests.h). Empty:
    // none taken this step (train.digest_every, or a compute that cannot digest yet).
    (std::vector<UnitDigest>, digests, {}, kLoadsMax),
    // A step of train.eval_every: the worker's part of the validation loss of the weights the step
    // began from — cross-entropy summed over its validation tokens, and their count (0: none).
    (double, val_ce_sum, 0),
    (uint64_t, val_tokens, 0),
    (uint64_t, log_bytes, 0),  // the step's upstream log put to the slice peers (0: none)
    // The last sparse slot's whole path on the snapshot thread, in its CPU time: the copy, the
    // checksum, the encoding, the MAC and the sends (train.snapshot_cpu_share sizes the window by it).
    (double, sparse_path_cpu_ms, 0))
};

struct StepCommit {
  static constexpr MsgType kType = MsgType::step_commit;
  SAL_WIRE_FIELDS(
    (uint64_t, epoch, 0),
    (uint64_t, step, 0))
};

// SPARe's patch (parallel.groups > 1): the step in flight goes on without the ranks it lost. The
// groups in `damaged` drop their work of this step (their ranks take part with zero gradients);
// each group computes, besides the shard types the plan gave it, the types in extra[group] (the
// redundancy policy's choice among the groups hosting the damaged groups' types) and its part of
// each type in `spread` (the types split over every group not damaged: group g's part is the
// k-th of n, k its place among them, n their count — spread_sequences); then the ranks
// in `ranks` (plan positions, ascending) synchronise the gradients over a data plane of their
// own (rank i of it is position ranks[i]: the plan's standby plane narrowed to them where each
// holds it warm, else one connected under prefix plan-<plan>/patch-<step>-<patch>) and vote again,
// carrying `patch`. A later loss in the same step sends a higher-numbered patch that replaces it
// (extra is the whole set each time). `rejoin` (a spreading patch only): the damaged groups whose
// ranks left still hold every expert between them (plan::missing_expert). They sit this step out
// like the others, but in the degraded steps that keep this patch they compute: a group of their
// ranks left, over a plane of those ranks connected under the patch's prefix and /rejoin-<group>.
struct StepPatch {
  static constexpr MsgType kType = MsgType::step_patch;
  SAL_WIRE_FIELDS(
    (uint64_t, epoch, 0),  // the step's (it does not change)
    (uint64_t, step, 0),
    (uint64_t, plan, 0),
    (uint32_t, patch, 0),  // 1, 2, ... within the step
    (std::vector<uint32_t>, ranks, {}, kListMax * 16),
    (std::vector<uint32_t>, damaged, {}, kListMax * 16),
    (std::vector<std::vector<uint32_t>>, extra, {}, kListMax * 16),
    (std::string, reason, {}, kTextMax),
    (std::vector<uint32_t>, spread, {}, kListMax * 16),
    // Per plan rank, the nodes its sparse slots go to from the next window on, over the nodes still
    // up (plan/snapshot_peers.h; empty: the job keeps no copies): the plan's peers may be lost.
    (std::vector<SlicePeers>, slice_peers, {}, kListMax),
    (std::vector<uint32_t>, rejoin, {}, kListMax * 16))
};

// A plan's rendezvous keys in the store ("plan-<plan>"): every data plane of the plan has its keys
// under this and a '/'; the controller erases or closes them there when the plan is over.
inline std::string plan_keys(uint64_t plan) { return "plan-" + std::to_string(plan); }

// A plan's standby plane's rendezvous keys ("standby-<plan>"; runtime/standby_plane.h): apart from
// plan_keys(plan), which are erased once every rank has connected the plan's planes, since the
// standby connects in the background after that. The controller closes them with the plan's.
inline std::string standby_keys(uint64_t plan) { return "standby-" + std::to_string(plan); }

// A patch's rendezvous keys within its plan's ("patch-<step>-<patch>"): its data plane's prefix is
// plan_keys(plan)/ and this. The controller closes them when a later patch of the step replaces it.
inline std::string patch_keys(uint64_t step, uint32_t patch) {
  return "patch-" + std::to_string(step) + "-" + std::to_string(patch);
}

// The step in flight stops (plan 0), or a plan being switched to was abandoned by the controller
// (plan N: its ranks leave it at once, whatever they are doing, and never begin it if they had not).
struct StepAbort {
  static constexpr MsgType kType = MsgType::step_abort;
  SAL_WIRE_FIELDS(
    (uint64_t, epoch, 0),
    (uint64_t, step, 0),
    (std::string, reason, {}, kTextMax),
    (uint64_t, plan, 0))
};

struct ErrorReply {
  static constexpr MsgType kType = MsgType::error;
  SAL_WIRE_FIELDS(
    (uint16_t, code, 0),
    (std::string, message, {}, kTextMax))
};

// The job a worker trains: the job file's text, evaluated by the worker exactly as the controller
// did (paths resolve against `dir`). Sent to each agent after Welcome, and by the agent to each
// worker after WorkerHello.
struct JobSpec {
  static constexpr MsgType kType = MsgType::job_spec;
  SAL_WIRE_FIELDS(
    (std::string, label, {}, kNameMax * 4),
    (std::string, dir, {}, kNameMax * 4),
    (std::string, text, {}, kJobTextMax),
    // The job's secret for sparse snapshot slices (ckpt/slice_mac.h), hex: workers seal the slots
    // they put with it, agents check them and seal what they serve. It travels only over the mesh
    // (CURVE beyond loopback) and the agent's worker endpoint (this host).
    (std::string, slice_mac_key, {}, kNameMax))
};

struct RankRef {
  SAL_WIRE_FIELDS(
    (uint32_t, node, 0),
    (uint32_t, index, 0))
};

// A unit of model state to move before the plan's first step: kind 0 embedding, 1 dense, 2 gate,
// 3 expert (as model::UnitKind); layer/expert -1 where they do not apply; ranks of the new plan.
struct UnitTransfer {
  SAL_WIRE_FIELDS(
    (uint8_t, kind, 0),
    (int32_t, layer, -1),
    (int32_t, expert, -1),
    (uint32_t, from, 0),
    (uint32_t, to, 0))
};

// A new plan: the plan value itself (plan/plan.h: allocation, placement, checkpoint schedule, shard
// stacks, its version), who its ranks are (rank r is plan position r), what moves, where to
// rendezvous. Applies from `step`; workers connect the plan's data plane (prefix
// "plan-<version>"), carry out the transfers, keep only the units the plan gives them, and answer
// PlanReady.
struct PlanUpdate {
  static constexpr MsgType kType = MsgType::plan_update;
  SAL_WIRE_FIELDS(
    (uint64_t, epoch, 0),
    (uint64_t, step, 0),
    (int32_t, my_rank, -1),                            // filled in by the agent for each of its workers
    (std::vector<RankRef>, ranks, {}, kListMax * 16),  // rank order
    (plan::Plan, plan, {}),
    (std::vector<UnitTransfer>, transfers, {}, kPlanMax),
    (std::string, store, {}, kNameMax),                // the rendezvous store endpoint
    // The dense-checkpoint fallback: every rank loads what it holds from `restore_dir` (written at
    // `step`), or creates it from the job's seed when the directory is empty (step 0); no transfers.
    (bool, restore, false),
    (std::string, restore_dir, {}, kTextMax),
    // Sparse snapshots (MoEtion) in peers' memory: every node's slice endpoint, the nodes each rank
    // puts its slots to (by rank), and what an agent may hold of them (bytes).
    (std::vector<SliceNode>, slice_nodes, {}, kListMax),
    (std::vector<SlicePeers>, slice_peers, {}, kListMax),
    (uint64_t, slice_budget, 0),
    // A restore from peers (restore, restore_window >= 0): every rank loads its units from the
    // complete window that begins at iteration restore_window, asking restore_holders, and replays
    // it; `step` is then restore_window + 1.
    (int64_t, restore_window, -1),
    (std::vector<SliceHolder>, restore_holders, {}, kListMax),
    // The window is one slot, taken after iteration `step` - 1: a rank whose units hold that state
    // keeps them and fetches only those it lacks. Not when the restore is for copies that disagree
    // (job/digests.h): a survivor's own copy may be the damaged one.
    (bool, restore_keeps, false),
    // The plan whose data planes the last committed step used, all intact since (0: none): a rank
    // holding such a plane (the plan's, a group's, a patch's) whose ranks are, in order, those of a
    // plane of this plan keeps it instead of connecting one (every rank of it holds the same).
    (uint64_t, keep_planes_of, 0),
    // Experts that lost every holder, rebuilt alone (MoEtion's upstream logs, no rollback): each
    // new holder of one loads its full copy from the window beginning at rebuild_window (asking
    // rebuild_holders) and replays its updates up to iteration rebuild_to from the logs of the
    // ranks of plan rebuild_plan (rebuild_ranks, in rank order), which the agents of slice_nodes
    // hold, each iteration clipped with its norm in rebuild_norms. rebuild_window -1: none.
    (int64_t, rebuild_window, -1),
    (std::vector<SliceHolder>, rebuild_holders, {}, kListMax),
    (uint64_t, rebuild_plan, 0),
    (std::vector<RankRef>, rebuild_ranks, {}, kListMax * 16),
    (uint64_t, rebuild_to, 0),
    // the global gradient norms the run clipped with, of iterations rebuild_window + 1 .. rebuild_to
    (std::vector<double>, rebuild_norms, {}, kLoadsMax),
    // A restore (restore_dir's snapshot or the seed) that relaunches: each worker named starts again
    // as a new process image (runtime/relaunch.h) and applies this plan there, as a restarted job does.
    (bool, relaunch, false))
  uint64_t number() const { return plan.version; }
};

struct PlanReady {
  static constexpr MsgType kType = MsgType::plan_ready;
  SAL_WIRE_FIELDS(
    (uint32_t, node_id, 0),
    (uint32_t, index, 0),
    (uint64_t, plan, 0),
    (bool, ok, false),
    (std::string, detail, {}, kTextMax),
    (double, ms, 0),          // the whole switch on this worker
    (double, connect_ms, 0),  // of which: the plan's data plane (rendezvous and Gloo context)
    (double, migrate_ms, 0),  // of which: receiving and sending unit states
    // What the switch met on the way that the controller should say (a restore from peers: a copy
    // that failed its checksum, a holder that did not answer, and the replica used instead).
    (std::vector<std::string>, notes, {}, kListMax),
    // Not ok because the dense restore could not read the snapshot the plan named (a unit file
    // gone, damaged, or of another step): the controller restores from another one next.
    (bool, snapshot_unreadable, false))
};

// Write a dense checkpoint of the committed state into `dir`: every rank of `plan` writes its
// share (each unit by one writer), then rank 0 writes the manifest. With `snapshot`, each rank
// copies its share to host memory between steps and writes it in the background while training
// goes on (no manifest: the controller marks the directory complete once every SaveDone is in).
struct SaveCheckpoint {
  static constexpr MsgType kType = MsgType::save_checkpoint;
  SAL_WIRE_FIELDS(
    (std::string, dir, {}, kTextMax),
    (uint64_t, step, 0),
    (uint64_t, plan, 0),
    (bool, snapshot, false),
    // The plan's ranks that are gone and do not save (a final checkpoint after a patched last
    // step): the others write the units those would have written (each unit by its lowest
    // holder still here).
    (std::vector<uint32_t>, absent, {}, kListMax))
};

struct SaveDone {
  static constexpr MsgType kType = MsgType::save_done;
  SAL_WIRE_FIELDS(
    (uint32_t, node_id, 0),
    (uint32_t, index, 0),
    (uint64_t, step, 0),
    (bool, ok, false),
    (std::string, detail, {}, kTextMax),
    (uint32_t, units, 0),                               // units this worker wrote
    (bool, snapshot, false),
    (double, copy_ms, 0),                               // snapshot: copying to host memory (the pause between steps)
    (double, ms, 0),                                    // copying and writing, on this worker
    (uint64_t, bytes, 0),                               // what the units hold (weights and both moments)
    (std::vector<std::string>, written, {}, kListMax))  // snapshot: the names of the units written (UnitId::name)
};

// A drill's fault: worker `index` of the node dies — it SIGKILLs its agent, then itself — when it
// reaches `point` in step `step` (in any step with `any_step`; `migration`: a plan switch that moves
// state to or from it). Relayed by the agent to that worker only. Point `corrupt` kills nothing: as
// step `step` begins, the worker flips `bits` bits of its copy of `unit`'s weights (a fault
// injector for the digests' drill, corrupt{}; the job must allow fault injection).
struct FaultArm {
  static constexpr MsgType kType = MsgType::fault_arm;
  SAL_WIRE_FIELDS(
    (uint32_t, index, 0),
    (FaultPoint, point, FaultPoint::forward),
    (uint64_t, step, 0),
    (bool, any_step, false),
    (std::string, reason, {}, kTextMax),
    (SliceUnitRef, unit, {}),  // corrupt: the unit (kind, layer, expert)
    (uint32_t, bits, 0))       // corrupt: how many bits to flip
};

struct WorkerHello {
  static constexpr MsgType kType = MsgType::worker_hello;
  SAL_WIRE_FIELDS(
    (uint32_t, index, 0),
    (std::string, device, {}, kNameMax),
    (uint32_t, pid, 0),
    (uint64_t, pending_plan, 0))  // a relaunched worker: the plan it was relaunched for (0: none)
};

struct WorkerStatus {
  static constexpr MsgType kType = MsgType::worker_status;
  SAL_WIRE_FIELDS(
    (uint32_t, index, 0),
    (WorkerState, state, WorkerState::starting),
    (Holding, held, {}))
};

struct ReplHello {
  static constexpr MsgType kType = MsgType::repl_hello;
  SAL_WIRE_FIELDS(
    (std::string, client, {}, kNameMax),
    (std::string, token, {}, kNameMax),  // a local endpoint's token (repl_token.h); empty under CURVE
    (std::string, cwd, {}, kTextMax))    // a local client's working directory (its relative paths); else empty
};

struct ReplWelcome {
  static constexpr MsgType kType = MsgType::repl_welcome;
  SAL_WIRE_FIELDS(
    (std::string, server, {}, kNameMax),
    (uint64_t, session, 0),
    (std::string, role, {}, kNameMax),
    (std::string, job, {}, kNameMax),
    (uint32_t, budget_ms, 0))
};

struct ReplEval {
  static constexpr MsgType kType = MsgType::repl_eval;
  SAL_WIRE_FIELDS(
    (uint64_t, id, 0),
    (std::string, chunk, {}, kChunkMax),
    (ValueFormat, format, ValueFormat::text))
};

struct ReplResult {
  static constexpr MsgType kType = MsgType::repl_result;
  SAL_WIRE_FIELDS(
    (uint64_t, id, 0),
    (bool, ok, false),
    (std::string, output, {}, kOutputMax),  // what print() wrote during the chunk
    (std::string, value, {}, kOutputMax),   // the returned values, rendered as Lua text or as a JSON array
    (std::string, error, {}, kTextMax),
    (uint64_t, elapsed_us, 0))
};

struct ReplComplete {
  static constexpr MsgType kType = MsgType::repl_complete;
  SAL_WIRE_FIELDS(
    (uint64_t, id, 0),
    (std::string, line, {}, kTextMax))
};

struct ReplCompletions {
  static constexpr MsgType kType = MsgType::repl_completions;
  SAL_WIRE_FIELDS(
    (uint64_t, id, 0),
    (std::vector<std::string>, candidates, {}, kListMax))
};

struct ReplBye {
  static constexpr MsgType kType = MsgType::repl_bye;
  SAL_WIRE_FIELDS()
};

}  // namespace sal::wire
