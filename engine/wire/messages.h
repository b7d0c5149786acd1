// messages.h — every control message of the Salamander protocol (docs/protocol.md is the spec).
//
// Each message is a plain struct with a static `fields(self, visit)` that names its fields in wire
// order, with an optional bound (max bytes of a string, max elements of a list). The codec
// (codec.h) uses that one list to encode, to decode with bounds checks, and to name the exact
// field in an error ("Heartbeat.workers[2].pid: expected uint, got str"). Enums travel as uint8
// and are range-checked against their `count_` member. Value types that live outside the wire
// (the plan, plan/plan.h) travel as they are: plan_fields.h gives their field lists.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "wire/message_types.h"
#include "wire/plan_fields.h"
#include "wire/slice_messages.h"

namespace sal::wire {

// What a worker's model state has seen: the plan it applied last, the steps committed into it, and
// the step whose gradients wait for a commit (-1: none) with the epoch that step began in. A
// restarted controller reconciles with it (job/driver.h).
struct Holding {
  uint64_t plan = 0;
  uint64_t steps = 0;
  int64_t pending = -1;
  uint64_t pending_epoch = 0;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("plan", s.plan);
    v("steps", s.steps);
    v("pending", s.pending);
    v("pending_epoch", s.pending_epoch);
  }
};

struct WorkerInfo {
  uint32_t index = 0;
  std::string device;
  uint32_t pid = 0;
  WorkerState state = WorkerState::starting;
  Holding held;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("index", s.index);
    v("device", s.device, kNameMax);
    v("pid", s.pid);
    v("state", s.state);
    v("held", s.held);
  }
};

struct RegisterNode {
  static constexpr MsgType kType = MsgType::register_node;
  std::string name;
  std::string host;
  uint32_t pid = 0;
  std::vector<std::string> devices;
  std::string build;
  // The id this agent had under a controller that restarted (UINT32_MAX: none); a resumed
  // controller gives it back when its journal knows it, so the plan's ranks stay valid.
  uint32_t previous_id = UINT32_MAX;
  // Where the agent holds other workers' sparse snapshots (its slice endpoint, SliceNode), and the
  // CURVE public key of that endpoint ("" where it is local).
  std::string slice_endpoint;
  std::string slice_key;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("name", s.name, kNameMax);
    v("host", s.host, kNameMax);
    v("pid", s.pid);
    v("devices", s.devices, kListMax);
    v("build", s.build, kNameMax);
    v("previous_id", s.previous_id);
    v("slice_endpoint", s.slice_endpoint, kNameMax);
    v("slice_key", s.slice_key, kNameMax);
  }
};

struct Welcome {
  static constexpr MsgType kType = MsgType::welcome;
  uint32_t node_id = 0;
  uint64_t epoch = 0;
  uint32_t heartbeat_ms = 0;
  uint32_t miss_limit = 0;
  std::string job;
  uint32_t grace_ms = 0;  // how long the agent rides out a silent controller (mesh.controller_grace_ms)
  // The public keys (Z85) the mesh admits as nodes — the job's agents, whose workers use their
  // agent's key: the only clients an agent's slice endpoint admits (empty where the mesh is local).
  std::vector<std::string> node_keys;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("node_id", s.node_id);
    v("epoch", s.epoch);
    v("heartbeat_ms", s.heartbeat_ms);
    v("miss_limit", s.miss_limit);
    v("job", s.job, kNameMax);
    v("grace_ms", s.grace_ms);
    v("node_keys", s.node_keys, kListMax);
  }
};

struct Heartbeat {
  static constexpr MsgType kType = MsgType::heartbeat;
  uint32_t node_id = 0;
  uint64_t seq = 0;
  std::vector<WorkerInfo> workers;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("node_id", s.node_id);
    v("seq", s.seq);
    v("workers", s.workers, kListMax);
  }
};

struct Ping {
  static constexpr MsgType kType = MsgType::ping;
  uint64_t epoch = 0;
  uint64_t step = 0;
  uint64_t seq = 0;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("epoch", s.epoch);
    v("step", s.step);
    v("seq", s.seq);
  }
};

struct WorkerEvent {
  static constexpr MsgType kType = MsgType::worker_event;
  uint32_t node_id = 0;
  uint32_t index = 0;
  WorkerEventKind kind = WorkerEventKind::started;
  uint32_t pid = 0;
  int32_t exit_code = 0;
  int32_t signal = 0;
  std::string detail;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("node_id", s.node_id);
    v("index", s.index);
    v("kind", s.kind);
    v("pid", s.pid);
    v("exit_code", s.exit_code);
    v("signal", s.signal);
    v("detail", s.detail, kTextMax);
  }
};

struct Goodbye {
  static constexpr MsgType kType = MsgType::goodbye;
  uint32_t node_id = 0;
  std::string reason;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("node_id", s.node_id);
    v("reason", s.reason, kTextMax);
  }
};

struct Command {
  static constexpr MsgType kType = MsgType::command;
  Verb verb = Verb::stop;
  std::string reason;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("verb", s.verb);
    v("reason", s.reason, kTextMax);
  }
};

struct StepBegin {
  static constexpr MsgType kType = MsgType::step_begin;
  uint64_t epoch = 0;
  uint64_t step = 0;
  uint64_t plan = 0;  // the plan the step runs under: workers that are not its ranks do not vote
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("epoch", s.epoch);
    v("step", s.step);
    v("plan", s.plan);
  }
};

// A worker's vote on a step, with what it measured: the controller commits when every participant
// voted yes, and keeps the numbers for metrics and for balancing expert loads.
struct StepVote {
  static constexpr MsgType kType = MsgType::step_vote;
  uint32_t node_id = 0;
  uint32_t index = 0;
  uint64_t epoch = 0;
  uint64_t step = 0;
  bool ok = false;
  std::string detail;
  double ce_sum = 0;              // cross-entropy summed over the worker's tokens
  double aux = 0;                 // the balancing loss (global, the same on every worker)
  uint64_t tokens = 0;            // the worker's tokens this step
  double grad_norm = 0;           // global gradient norm (the same on every worker)
  double lr = 0;                  // the learning rate the commit will apply
  double compute_ms = 0;          // the worker's time for forward, backward and gradient sync
  std::vector<uint32_t> loads;    // token-to-expert assignments, [layer][expert] flattened
  uint32_t patch = 0;             // the StepPatch this vote answers (0: the step as begun)
  // The sparse snapshots (MoEtion) the worker holds after its last commit: bytes, the newest
  // complete window's iterations (-1: none yet), and the last slot's copy time and bytes.
  uint64_t sparse_bytes = 0;
  int64_t sparse_from = -1, sparse_to = -1;
  double sparse_copy_ms = 0;
  uint64_t sparse_slot_bytes = 0;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("node_id", s.node_id);
    v("index", s.index);
    v("epoch", s.epoch);
    v("step", s.step);
    v("ok", s.ok);
    v("detail", s.detail, kTextMax);
    v("ce_sum", s.ce_sum);
    v("aux", s.aux);
    v("tokens", s.tokens);
    v("grad_norm", s.grad_norm);
    v("lr", s.lr);
    v("compute_ms", s.compute_ms);
    v("loads", s.loads, kLoadsMax);
    v("sparse_bytes", s.sparse_bytes);
    v("sparse_from", s.sparse_from);
    v("sparse_to", s.sparse_to);
    v("sparse_copy_ms", s.sparse_copy_ms);
    v("sparse_slot_bytes", s.sparse_slot_bytes);
    v("patch", s.patch);
  }
};

struct StepCommit {
  static constexpr MsgType kType = MsgType::step_commit;
  uint64_t epoch = 0;
  uint64_t step = 0;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("epoch", s.epoch);
    v("step", s.step);
  }
};

// SPARe's patch (parallel.groups > 1): the step in flight goes on without the ranks it lost. The
// groups in `damaged` drop their work of this step (their ranks take part with zero gradients);
// each group computes, besides the shard types the plan gave it, the types in extra[group] (the
// redundancy policy's choice among the groups hosting the damaged groups' types); then the ranks
// in `ranks` (plan positions, ascending) synchronise the gradients over a data plane of their
// own (prefix plan-<plan>/patch-<step>-<patch>: rank i of it is position ranks[i]) and vote again,
// carrying `patch`. A later loss in the same step sends a higher-numbered patch that replaces it
// (extra is the whole set each time).
struct StepPatch {
  static constexpr MsgType kType = MsgType::step_patch;
  uint64_t epoch = 0;  // the step's (it does not change)
  uint64_t step = 0;
  uint64_t plan = 0;
  uint32_t patch = 0;  // 1, 2, ... within the step
  std::vector<uint32_t> ranks;
  std::vector<uint32_t> damaged;
  std::vector<std::vector<uint32_t>> extra;
  std::string reason;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("epoch", s.epoch);
    v("step", s.step);
    v("plan", s.plan);
    v("patch", s.patch);
    v("ranks", s.ranks, kListMax * 16);
    v("damaged", s.damaged, kListMax * 16);
    v("extra", s.extra, kListMax * 16);
    v("reason", s.reason, kTextMax);
  }
};

struct StepAbort {
  static constexpr MsgType kType = MsgType::step_abort;
  uint64_t epoch = 0;
  uint64_t step = 0;
  std::string reason;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("epoch", s.epoch);
    v("step", s.step);
    v("reason", s.reason, kTextMax);
  }
};

struct ErrorReply {
  static constexpr MsgType kType = MsgType::error;
  uint16_t code = 0;
  std::string message;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("code", s.code);
    v("message", s.message, kTextMax);
  }
};

// The job a worker trains: the job file's text, evaluated by the worker exactly as the controller
// did (paths resolve against `dir`). Sent to each agent after Welcome, and by the agent to each
// worker after WorkerHello.
struct JobSpec {
  static constexpr MsgType kType = MsgType::job_spec;
  std::string label;
  std::string dir;
  std::string text;
  // The job's secret for sparse snapshot slices (ckpt/slice_mac.h), hex: workers seal the slots
  // they put with it, agents check them and seal what they serve. It travels only over the mesh
  // (CURVE beyond loopback) and the agent's worker endpoint (this host).
  std::string slice_mac_key;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("label", s.label, kNameMax * 4);
    v("dir", s.dir, kNameMax * 4);
    v("text", s.text, kJobTextMax);
    v("slice_mac_key", s.slice_mac_key, kNameMax);
  }
};

struct RankRef {
  uint32_t node = 0;
  uint32_t index = 0;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("node", s.node);
    v("index", s.index);
  }
};

// A unit of model state to move before the plan's first step: kind 0 embedding, 1 dense, 2 gate,
// 3 expert (as model::UnitKind); layer/expert -1 where they do not apply; ranks of the new plan.
struct UnitTransfer {
  uint8_t kind = 0;
  int32_t layer = -1;
  int32_t expert = -1;
  uint32_t from = 0;
  uint32_t to = 0;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("kind", s.kind);
    v("layer", s.layer);
    v("expert", s.expert);
    v("from", s.from);
    v("to", s.to);
  }
};

// A new plan: the plan value itself (plan/plan.h: allocation, placement, checkpoint schedule, shard
// stacks, its version), who its ranks are (rank r is plan position r), what moves, where to
// rendezvous. Applies from `step`; workers connect the plan's data plane (prefix
// "plan-<version>"), carry out the transfers, keep only the units the plan gives them, and answer
// PlanReady.
struct PlanUpdate {
  static constexpr MsgType kType = MsgType::plan_update;
  uint64_t epoch = 0;
  uint64_t step = 0;
  int32_t my_rank = -1;                // filled in by the agent for each of its workers
  std::vector<RankRef> ranks;          // rank order
  plan::Plan plan;
  std::vector<UnitTransfer> transfers;
  std::string store;                   // the rendezvous store endpoint
  // The dense-checkpoint fallback: every rank loads what it holds from `restore_dir` (written at
  // `step`), or creates it from the job's seed when the directory is empty (step 0); no transfers.
  bool restore = false;
  std::string restore_dir;
  // Sparse snapshots (MoEtion) in peers' memory: every node's slice endpoint, the nodes each rank
  // puts its slots to (by rank), and what an agent may hold of them (bytes).
  std::vector<SliceNode> slice_nodes;
  std::vector<SlicePeers> slice_peers;
  uint64_t slice_budget = 0;
  // A restore from peers (restore, restore_window >= 0): every rank loads its units from the
  // complete window that begins at iteration restore_window, asking restore_holders, and replays
  // it; `step` is then restore_window + 1.
  int64_t restore_window = -1;
  std::vector<SliceHolder> restore_holders;
  uint64_t number() const { return plan.version; }
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("epoch", s.epoch);
    v("step", s.step);
    v("my_rank", s.my_rank);
    v("ranks", s.ranks, kListMax * 16);
    v("plan", s.plan);
    v("transfers", s.transfers, kPlanMax);
    v("store", s.store, kNameMax);
    v("restore", s.restore);
    v("restore_dir", s.restore_dir, kTextMax);
    v("slice_nodes", s.slice_nodes, kListMax);
    v("slice_peers", s.slice_peers, kListMax);
    v("slice_budget", s.slice_budget);
    v("restore_window", s.restore_window);
    v("restore_holders", s.restore_holders, kListMax);
  }
};

struct PlanReady {
  static constexpr MsgType kType = MsgType::plan_ready;
  uint32_t node_id = 0;
  uint32_t index = 0;
  uint64_t plan = 0;
  bool ok = false;
  std::string detail;
  double ms = 0;          // the whole switch on this worker
  double connect_ms = 0;  // of which: the plan's data plane (rendezvous and Gloo context)
  double migrate_ms = 0;  // of which: receiving and sending unit states
  // What the switch met on the way that the controller should say (a restore from peers: a copy
  // that failed its checksum, a holder that did not answer, and the replica used instead).
  std::vector<std::string> notes;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("node_id", s.node_id);
    v("index", s.index);
    v("plan", s.plan);
    v("ok", s.ok);
    v("detail", s.detail, kTextMax);
    v("ms", s.ms);
    v("connect_ms", s.connect_ms);
    v("migrate_ms", s.migrate_ms);
    v("notes", s.notes, kListMax);
  }
};

// Write a dense checkpoint of the committed state into `dir`: every rank of `plan` writes its
// share (each unit by one writer), then rank 0 writes the manifest. With `snapshot`, each rank
// copies its share to host memory between steps and writes it in the background while training
// goes on (no manifest: the controller marks the directory complete once every SaveDone is in).
struct SaveCheckpoint {
  static constexpr MsgType kType = MsgType::save_checkpoint;
  std::string dir;
  uint64_t step = 0;
  uint64_t plan = 0;
  bool snapshot = false;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("dir", s.dir, kTextMax);
    v("step", s.step);
    v("plan", s.plan);
    v("snapshot", s.snapshot);
  }
};

struct SaveDone {
  static constexpr MsgType kType = MsgType::save_done;
  uint32_t node_id = 0;
  uint32_t index = 0;
  uint64_t step = 0;
  bool ok = false;
  std::string detail;
  uint32_t units = 0;  // units this worker wrote
  bool snapshot = false;
  double copy_ms = 0;  // snapshot: copying to host memory (the pause between steps)
  double ms = 0;       // copying and writing, on this worker
  uint64_t bytes = 0;  // what the units hold (weights and both moments)
  std::vector<std::string> written;  // snapshot: the names of the units written (UnitId::name)
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("node_id", s.node_id);
    v("index", s.index);
    v("step", s.step);
    v("ok", s.ok);
    v("detail", s.detail, kTextMax);
    v("units", s.units);
    v("snapshot", s.snapshot);
    v("copy_ms", s.copy_ms);
    v("ms", s.ms);
    v("bytes", s.bytes);
    v("written", s.written, kListMax);
  }
};

// A drill's fault: worker `index` of the node dies — it SIGKILLs its agent, then itself — when it
// reaches `point` in step `step` (in any step with `any_step`; `migration`: a plan switch that moves
// state to or from it). Relayed by the agent to that worker only.
struct FaultArm {
  static constexpr MsgType kType = MsgType::fault_arm;
  uint32_t index = 0;
  FaultPoint point = FaultPoint::forward;
  uint64_t step = 0;
  bool any_step = false;
  std::string reason;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("index", s.index);
    v("point", s.point);
    v("step", s.step);
    v("any_step", s.any_step);
    v("reason", s.reason, kTextMax);
  }
};

struct WorkerHello {
  static constexpr MsgType kType = MsgType::worker_hello;
  uint32_t index = 0;
  std::string device;
  uint32_t pid = 0;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("index", s.index);
    v("device", s.device, kNameMax);
    v("pid", s.pid);
  }
};

struct WorkerStatus {
  static constexpr MsgType kType = MsgType::worker_status;
  uint32_t index = 0;
  WorkerState state = WorkerState::starting;
  Holding held;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("index", s.index);
    v("state", s.state);
    v("held", s.held);
  }
};

struct ReplHello {
  static constexpr MsgType kType = MsgType::repl_hello;
  std::string client;
  template <class S, class V>
  static void fields(S& s, V& v) { v("client", s.client, kNameMax); }
};

struct ReplWelcome {
  static constexpr MsgType kType = MsgType::repl_welcome;
  std::string server;
  uint64_t session = 0;
  std::string role;
  std::string job;
  uint32_t budget_ms = 0;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("server", s.server, kNameMax);
    v("session", s.session);
    v("role", s.role, kNameMax);
    v("job", s.job, kNameMax);
    v("budget_ms", s.budget_ms);
  }
};

struct ReplEval {
  static constexpr MsgType kType = MsgType::repl_eval;
  uint64_t id = 0;
  std::string chunk;
  ValueFormat format = ValueFormat::text;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("id", s.id);
    v("chunk", s.chunk, kChunkMax);
    v("format", s.format);
  }
};

struct ReplResult {
  static constexpr MsgType kType = MsgType::repl_result;
  uint64_t id = 0;
  bool ok = false;
  std::string output;  // what print() wrote during the chunk
  std::string value;   // the returned values, rendered as Lua text or as a JSON array
  std::string error;
  uint64_t elapsed_us = 0;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("id", s.id);
    v("ok", s.ok);
    v("output", s.output, kOutputMax);
    v("value", s.value, kOutputMax);
    v("error", s.error, kTextMax);
    v("elapsed_us", s.elapsed_us);
  }
};

struct ReplComplete {
  static constexpr MsgType kType = MsgType::repl_complete;
  uint64_t id = 0;
  std::string line;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("id", s.id);
    v("line", s.line, kTextMax);
  }
};

struct ReplCompletions {
  static constexpr MsgType kType = MsgType::repl_completions;
  uint64_t id = 0;
  std::vector<std::string> candidates;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("id", s.id);
    v("candidates", s.candidates, kListMax);
  }
};

struct ReplBye {
  static constexpr MsgType kType = MsgType::repl_bye;
  template <class S, class V>
  static void fields(S&, V&) {}
};

}  // namespace sal::wire
