// slice_messages.h — the messages of the sparse snapshots (MoEtion) held in peers' memory: a worker
// puts each slot it takes to the agents of its peer nodes, a worker restoring from peers fetches
// the slots of a window from them, and each agent reports to the controller what it holds (and
// what it refused). docs/protocol.md ("Sparse snapshots in peers' memory").
//
// SlicePut (worker -> agent's slice endpoint, and agent -> worker in answer to a SliceFetch) is
// the one message with frames after its body: each unit's weights, then (a full copy) its first and
// second moments, as raw little-endian floats, `floats` of them per frame, in the order of `units`
// (ckpt/slice_frames.h encodes and checks them). Every other message here is header + body.
// Included by messages.h, which the codec instantiates them from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wire/fields.h"
#include "wire/message_types.h"
#include "wire/plan_fields.h"

namespace sal::wire {

constexpr size_t kSliceUnitsMax = 1u << 16;  // units in one slot, or asked for in one fetch

// One unit of a slot: which (kind as model::UnitKind, layer/expert -1 where they do not apply),
// whether it is a full copy, how many floats each of its frames holds, and its checksum
// (ckpt::unit_checksum) as the writer took it.
struct SliceUnit {
  SAL_WIRE_FIELDS(
    (uint8_t, kind, 0),
    (int32_t, layer, -1),
    (int32_t, expert, -1),
    (bool, full, false),
    (uint64_t, floats, 0),
    (uint64_t, checksum, 0))
};

// A unit named in a fetch or a report.
struct SliceUnitRef {
  SAL_WIRE_FIELDS(
    (uint8_t, kind, 0),
    (int32_t, layer, -1),
    (int32_t, expert, -1))
  bool operator==(const SliceUnitRef&) const = default;
  auto operator<=>(const SliceUnitRef&) const = default;
};

// One expert's assignments in an upstream log (model/expert_replay.h): the pass, the expert, how
// many rows went to each rank of the plan, the ranks holding the expert, the assignment slots in the
// order they left, and their FNV-1a checksum (ckpt::log_checksum). No frames.
struct SliceLog {
  SAL_WIRE_FIELDS(
    (uint32_t, pass, 0),
    (int32_t, layer, -1),
    (int32_t, expert, -1),
    (std::vector<uint32_t>, to, {}, kListMax * 16),
    (std::vector<uint32_t>, holders, {}, kListMax * 16),
    (std::vector<uint32_t>, slots, {}, kLoadsMax),
    (uint64_t, checksum, 0))
};

// One layer's tokens of one pass in an upstream log: k, how many tokens, and the checksum of its
// three frames (each token's input row, its combine gradient: `tokens` x d floats each; then the
// tokens x k combine weights).
struct SliceTokens {
  SAL_WIRE_FIELDS(
    (uint32_t, pass, 0),
    (int32_t, layer, -1),
    (uint32_t, k, 0),
    (uint64_t, tokens, 0),
    (uint64_t, checksum, 0))
};

// Slot `index` of writer (node, index)'s window under `plan`'s schedule, taken after `step`'s
// update, with that step's global gradient norm. `request` is 0 for a put, the fetch's otherwise.
// With `log_only`, the writer's upstream log of iteration `step` instead (no units: `logs`, and
// `token_logs`, three frames each, after the body; put before the writer votes for the step).
struct SlicePut {
  static constexpr MsgType kType = MsgType::slice_put;
  SAL_WIRE_FIELDS(
    (uint64_t, request, 0),
    (uint32_t, writer_node, 0),
    (uint32_t, writer_index, 0),
    (uint64_t, plan, 0),
    (plan::CheckpointSchedule, schedule, {}),
    (uint64_t, step, 0),
    (uint32_t, index, 0),
    (double, grad_norm, 0),
    (std::vector<SliceUnit>, units, {}, kSliceUnitsMax),
    (bool, log_only, false),
    (std::vector<SliceLog>, logs, {}, kSliceUnitsMax),
    (std::vector<SliceTokens>, token_logs, {}, kSliceUnitsMax))
};

// Worker -> agent: the slots of the complete window beginning at `window_from` that hold `units`
// (from any writer). Answered by one SlicePut per slot (with only the units asked for), then
// SliceDone. With `log_units` instead: every upstream log of iterations logs_from..logs_to the
// agent holds (any writer), one log-only SlicePut each with only those experts' rows, then
// SliceDone.
struct SliceFetch {
  static constexpr MsgType kType = MsgType::slice_fetch;
  SAL_WIRE_FIELDS(
    (uint64_t, request, 0),
    (uint64_t, window_from, 0),
    (std::vector<SliceUnitRef>, units, {}, kSliceUnitsMax),
    (std::vector<SliceUnitRef>, log_units, {}, kSliceUnitsMax),
    (uint64_t, logs_from, 0),
    (uint64_t, logs_to, 0))
};

// The end of a fetch's answer: how many slots were sent, and what the agent does not hold.
struct SliceDone {
  static constexpr MsgType kType = MsgType::slice_done;
  SAL_WIRE_FIELDS(
    (uint64_t, request, 0),
    (uint32_t, slots, 0),
    (std::string, detail, {}, kTextMax))
};

// A complete window an agent holds: whose, under which plan, its iterations and its units.
struct SliceWindow {
  SAL_WIRE_FIELDS(
    (uint32_t, writer_node, 0),
    (uint32_t, writer_index, 0),
    (uint64_t, plan, 0),
    (uint64_t, from, 0),
    (uint64_t, to, 0),
    (std::vector<SliceUnitRef>, units, {}, kSliceUnitsMax))
};

// Agent -> controller, whenever what it holds changes: every complete window, the bytes held
// against the budget, and the slots it refused since the last report (with the last reason).
struct SliceReport {
  static constexpr MsgType kType = MsgType::slice_report;
  SAL_WIRE_FIELDS(
    (uint32_t, node_id, 0),
    (uint64_t, bytes, 0),
    (uint64_t, budget, 0),
    (std::vector<SliceWindow>, windows, {}, kListMax),
    (uint32_t, refused, 0),
    (std::string, refusal, {}, kTextMax),
    (uint64_t, log_bytes, 0))  // of `bytes`: the upstream logs held
};

// In a PlanUpdate: a node's slice endpoint and its CURVE public key ("" where it is local).
struct SliceNode {
  SAL_WIRE_FIELDS(
    (uint32_t, node, 0),
    (std::string, endpoint, {}, kNameMax),
    (std::string, key, {}, kNameMax))
  bool operator==(const SliceNode&) const = default;
};

// In a PlanUpdate: the nodes (SliceNode::node) a rank puts its slots to, in order.
struct SlicePeers {
  SAL_WIRE_FIELDS(
    (std::vector<uint32_t>, nodes, {}, kListMax))
};

// In a restoring PlanUpdate: a node holding the restore window, and which units of it (a worker
// asks the first holder of each unit it needs, then the next when a copy fails its checksum).
struct SliceHolder {
  SAL_WIRE_FIELDS(
    (uint32_t, node, 0),
    (std::vector<SliceUnitRef>, units, {}, kSliceUnitsMax))
};

}  // namespace sal::wire
