// peer_windows.h — the sparse rung's question (ladder.h): which complete window of sparse
// snapshots (MoEtion) held in the agents' memory can the whole model be restored from? Each agent
// reports the complete windows it holds (wire::SliceReport: per writer, the iterations and the
// units in full). A window serves when, among the live nodes' reports, every unit of the model is
// in a complete window beginning at the same iteration (the model is rolled back as one and
// replayed), and it begins before the committed step (a window from beyond it belongs to steps a
// restore undid; one that ends beyond it, to the steps being replayed). The newest such window wins; for each unit the
// holders are listed in node order (a restoring worker asks them in turn, skipping a copy that
// fails its checksum). Pure.
//
// PeerWindows is the driver's part that keeps what the sparse rung needs between events: each
// agent's last report (and the refusals said of it), the windows a restore failed to load, and the
// restore in flight or in force — the committed steps it replaces and the iteration its replay
// runs to (no plan may move state before the replay ends).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
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

class PeerWindows {
 public:
  PeerWindows(const ModelShape& shape, uint32_t copies) : shape_(shape), copies_(copies) {}

  // An agent's report, kept until its next. Returns what to say of its refusals, if any is due:
  // a node's first refusal, then its 10th, 100th, ... (an agent short of memory refuses a slot
  // every iteration).
  std::optional<std::string> report(const wire::SliceReport& r);
  const std::map<NodeId, wire::SliceReport>& reports() const { return reports_; }

  // The newest window the live nodes hold that restores the model before `committed` (none when
  // the job keeps no copies).
  std::optional<PeerWindow> restorable(const std::set<NodeId>& live, uint64_t committed) const;

  // A restore from a window begins, with `committed` steps committed: the first restore of a loss
  // remembers them (a retry, or an older window after a failed one, keeps the first).
  void restore_begun(uint64_t committed) {
    if (replaced_ == 0) replaced_ = committed;
  }
  // The committed steps before the first restore from a window of this loss (0: none began): what
  // a restore that follows a failed one counts the steps run again from.
  uint64_t replaced() const { return replaced_; }
  // The restore from the window beginning at `from` could not be applied: the window is not tried
  // again.
  void restore_failed(uint64_t from) { failed_.insert(from); }
  // A plan is in force: a sparse restore's replay runs to `replay_to` (none: no replay).
  void plan_applied(std::optional<uint64_t> replay_to) {
    replaced_ = 0;
    replay_to_ = replay_to;
  }
  // Until the replay's last iteration commits, no plan may move state (joins and rebalances wait;
  // a loss restores again).
  bool replaying(uint64_t committed) const { return replay_to_ && committed <= *replay_to_; }
  std::optional<uint64_t> replay_to() const { return replay_to_; }

 private:
  ModelShape shape_;
  uint32_t copies_;
  std::map<NodeId, wire::SliceReport> reports_;  // what each agent last reported holding
  std::map<NodeId, uint32_t> refusals_said_;     // per node: its refusals when the last was said
  std::set<uint64_t> failed_;                    // windows (first iteration) a restore failed to load
  uint64_t replaced_ = 0;                        // a restore in flight: the committed steps before it
  std::optional<uint64_t> replay_to_;            // a restore in force replays up to this iteration
};

}  // namespace sal::job
