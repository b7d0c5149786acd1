// message_types.h — the protocol's message type numbers, the bounds its field lists use, and its
// small enums (messages.h and slice_messages.h hold the messages; docs/protocol.md is the spec).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace sal::wire {

enum class MsgType : uint16_t {
  // agent <-> controller (mesh endpoint)
  register_node = 1,
  welcome = 2,
  heartbeat = 3,
  ping = 4,
  worker_event = 5,
  goodbye = 6,
  command = 7,
  step_begin = 8,
  step_vote = 9,
  step_commit = 10,
  step_abort = 11,
  error = 12,
  // training: controller -> agent -> workers, and back
  job_spec = 13,
  plan_update = 14,
  plan_ready = 15,
  save_checkpoint = 16,
  save_done = 17,
  fault_arm = 18,
  slice_report = 19,  // agent -> controller (slice_messages.h)
  // worker <-> agent (the agent's local endpoint); step_* and command are relayed unchanged
  worker_hello = 20,
  worker_status = 21,
  // sparse snapshots: worker <-> an agent's slice endpoint (slice_messages.h)
  slice_put = 22,
  slice_fetch = 23,
  slice_done = 24,
  // SPARe's patch: controller -> agent -> workers (messages.h)
  step_patch = 25,
  // REPL client <-> controller (REPL endpoint)
  repl_hello = 40,
  repl_welcome = 41,
  repl_eval = 42,
  repl_result = 43,
  repl_complete = 44,
  repl_completions = 45,
  repl_bye = 46,
};

std::string_view type_name(MsgType t);
bool known_type(uint16_t t);

// Bounds used by the field lists below.
constexpr size_t kNameMax = 256;            // node names, hosts, device strings
constexpr size_t kTextMax = 64u << 10;      // reasons, details, error messages
constexpr size_t kChunkMax = 1u << 20;      // a REPL chunk
constexpr size_t kOutputMax = 4u << 20;     // a REPL result (printed output or value)
constexpr size_t kListMax = 4096;           // devices, workers per node, completions
constexpr size_t kLoadsMax = 1u << 20;      // layers x experts in a vote
constexpr size_t kPlanMax = 4u << 20;       // the transfers of a plan update
constexpr size_t kJobTextMax = 1u << 20;    // a job file's text

enum class WorkerState : uint8_t { starting, ready, draining, stopped, count_ };
// `restarted`: the agent started a new worker in the place of one that crashed (a new index, the
// same device; its detail says which it replaces and how many restarts are left).
enum class WorkerEventKind : uint8_t { started, ready, exited, spawn_failed, restarted, count_ };
enum class Verb : uint8_t { stop, drain, kill, count_ };
// Where a drill's armed fault kills a worker (FaultArm); `corrupt` flips bits of a unit instead.
enum class FaultPoint : uint8_t { forward, alltoall, allreduce, migration, snapshot, backward, corrupt, validation, count_ };
enum class ValueFormat : uint8_t { text, json, count_ };

// Error codes in ErrorReply.
enum class ErrorCode : uint16_t {
  malformed = 1,        // could not be decoded; the message says which field and why
  bad_version = 2,      // protocol version this peer does not speak
  unknown_node = 3,     // node id unknown or declared dead: register again
  not_allowed = 4,      // the session's role does not permit this
  bad_request = 5,      // decoded fine but makes no sense in this state
};

}  // namespace sal::wire
