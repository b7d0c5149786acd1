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

#include "wire/message_types.h"
#include "wire/plan_fields.h"

namespace sal::wire {

constexpr size_t kSliceUnitsMax = 1u << 16;  // units in one slot, or asked for in one fetch

// One unit of a slot: which (kind as model::UnitKind, layer/expert -1 where they do not apply),
// whether it is a full copy, how many floats each of its frames holds, and its checksum
// (ckpt::unit_checksum) as the writer took it.
struct SliceUnit {
  uint8_t kind = 0;
  int32_t layer = -1;
  int32_t expert = -1;
  bool full = false;
  uint64_t floats = 0;
  uint64_t checksum = 0;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("kind", s.kind);
    v("layer", s.layer);
    v("expert", s.expert);
    v("full", s.full);
    v("floats", s.floats);
    v("checksum", s.checksum);
  }
};

// A unit named in a fetch or a report.
struct SliceUnitRef {
  uint8_t kind = 0;
  int32_t layer = -1;
  int32_t expert = -1;
  bool operator==(const SliceUnitRef&) const = default;
  auto operator<=>(const SliceUnitRef&) const = default;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("kind", s.kind);
    v("layer", s.layer);
    v("expert", s.expert);
  }
};

// Slot `index` of writer (node, index)'s window under `plan`'s schedule, taken after `step`'s
// update, with that step's global gradient norm. `request` is 0 for a put, the fetch's otherwise.
struct SlicePut {
  static constexpr MsgType kType = MsgType::slice_put;
  uint64_t request = 0;
  uint32_t writer_node = 0;
  uint32_t writer_index = 0;
  uint64_t plan = 0;
  plan::CheckpointSchedule schedule;
  uint64_t step = 0;
  uint32_t index = 0;
  double grad_norm = 0;
  std::vector<SliceUnit> units;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("request", s.request);
    v("writer_node", s.writer_node);
    v("writer_index", s.writer_index);
    v("plan", s.plan);
    v("schedule", s.schedule);
    v("step", s.step);
    v("index", s.index);
    v("grad_norm", s.grad_norm);
    v("units", s.units, kSliceUnitsMax);
  }
};

// Worker -> agent: the slots of the complete window beginning at `window_from` that hold `units`
// (from any writer). Answered by one SlicePut per slot (with only the units asked for), then
// SliceDone.
struct SliceFetch {
  static constexpr MsgType kType = MsgType::slice_fetch;
  uint64_t request = 0;
  uint64_t window_from = 0;
  std::vector<SliceUnitRef> units;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("request", s.request);
    v("window_from", s.window_from);
    v("units", s.units, kSliceUnitsMax);
  }
};

// The end of a fetch's answer: how many slots were sent, and what the agent does not hold.
struct SliceDone {
  static constexpr MsgType kType = MsgType::slice_done;
  uint64_t request = 0;
  uint32_t slots = 0;
  std::string detail;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("request", s.request);
    v("slots", s.slots);
    v("detail", s.detail, kTextMax);
  }
};

// A complete window an agent holds: whose, under which plan, its iterations and its units.
struct SliceWindow {
  uint32_t writer_node = 0;
  uint32_t writer_index = 0;
  uint64_t plan = 0;
  uint64_t from = 0, to = 0;
  std::vector<SliceUnitRef> units;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("writer_node", s.writer_node);
    v("writer_index", s.writer_index);
    v("plan", s.plan);
    v("from", s.from);
    v("to", s.to);
    v("units", s.units, kSliceUnitsMax);
  }
};

// Agent -> controller, whenever what it holds changes: every complete window, the bytes held
// against the budget, and the slots it refused since the last report (with the last reason).
struct SliceReport {
  static constexpr MsgType kType = MsgType::slice_report;
  uint32_t node_id = 0;
  uint64_t bytes = 0;
  uint64_t budget = 0;
  std::vector<SliceWindow> windows;
  uint32_t refused = 0;
  std::string refusal;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("node_id", s.node_id);
    v("bytes", s.bytes);
    v("budget", s.budget);
    v("windows", s.windows, kListMax);
    v("refused", s.refused);
    v("refusal", s.refusal, kTextMax);
  }
};

// In a PlanUpdate: a node's slice endpoint and its CURVE public key ("" where it is local).
struct SliceNode {
  uint32_t node = 0;
  std::string endpoint;
  std::string key;
  bool operator==(const SliceNode&) const = default;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("node", s.node);
    v("endpoint", s.endpoint, kNameMax);
    v("key", s.key, kNameMax);
  }
};

// In a PlanUpdate: the nodes (SliceNode::node) a rank puts its slots to, in order.
struct SlicePeers {
  std::vector<uint32_t> nodes;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("nodes", s.nodes, kListMax);
  }
};

// In a restoring PlanUpdate: a node holding the restore window, and which units of it (a worker
// asks the first holder of each unit it needs, then the next when a copy fails its checksum).
struct SliceHolder {
  uint32_t node = 0;
  std::vector<SliceUnitRef> units;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("node", s.node);
    v("units", s.units, kSliceUnitsMax);
  }
};

}  // namespace sal::wire
