// peer_windows.h — the sparse rung's question (ladder.h): which complete window of sparse
// snapshots (MoEtion) held in the agents' memory can the whole model be restored from? Each agent
// reports the complete windows it holds (wire::SliceReport: per writer, the iterations and the
// units in full). A window serves when, among the live nodes' reports, every unit of the model is
// in a complete window beginning at the same iteration (the model is rolled back as one and
// replayed), and it begins before the committed step (a window from beyond it belongs to steps a
// restore undid; one that ends beyond it, to the steps being replayed). The newest such window wins; for each unit the
// holders are listed in node order (a restoring worker asks them in turn, skipping a copy that
// fails its checksum). Pure.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "core/ids.h"
#include "core/model_shape.h"
#include "wire/messages.h"

namespace sal::job {

struct PeerWindow {
  uint64_t from = 0, to = 0;                  // the window's first and last iterations
  std::vector<wire::SliceHolder> holders;     // the live nodes holding it, with their units
};

// `skip`: windows (by first iteration) a restore already failed to load.
std::optional<PeerWindow> restorable_window(const std::map<NodeId, wire::SliceReport>& reports,
                                            const std::set<NodeId>& live, const ModelShape& shape, uint64_t committed,
                                            const std::set<uint64_t>& skip);

}  // namespace sal::job
