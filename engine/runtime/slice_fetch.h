// slice_fetch.h — a restoring worker's side of the sparse rung (MoEtion): the units it holds under
// the new plan are fetched from the agents that hold the restore window in their memory
// (PlanUpdate.restore_holders, mesh/slice_server.h), and checked before anything is loaded. Each
// unit comes whole from one holder — its compute weights in the slots before its full one, then
// its full state — and a unit whose copies there fail their checksum, are incomplete, or do not
// come within the time limit is asked of its next holder; each such fallback is a note the
// controller turns into an event. A unit that no holder can give fails the restore, naming the
// unit and the holders tried (the controller then falls to the dense rung).
#pragma once

#include <zmq.hpp>

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ckpt/sparse.h"
#include "core/result.h"
#include "model/expert_replay.h"
#include "wire/messages.h"

namespace sal::runtime {

struct FetchedWindow {
  std::vector<ckpt::SparseSlot> slots;  // the window's slots in order, with the units asked for
  uint64_t bytes = 0;
};

// How a worker reaches the holders: its CURVE key file (towards holders off loopback) and the
// job's slice key (hex), whose MAC every slot a holder answers must carry.
struct SliceAccess {
  std::string key_file;
  std::string mac_key;
};

// `wanted`: the units this rank holds under the plan. `notes` gets the fallbacks on the way,
// whether the fetch succeeds or not (a slot without the job's MAC is one: the next holder is asked).
// `stopped`, asked every few ms while an answer is awaited: the fetch gives up at once (the plan
// was abandoned).
Result<FetchedWindow> fetch_window(zmq::context_t& ctx, const wire::PlanUpdate& p, const std::set<UnitId>& wanted,
                                   const ModelShape& shape, const SliceAccess& access, int timeout_ms,
                                   std::vector<std::string>& notes, const std::function<bool()>& stopped);

// The upstream logs (model/expert_replay.h) a rebuild of lost experts replays: for each iteration,
// every rank's log, in the rank order of the plan they ran under.
struct FetchedLogs {
  struct Iteration {
    std::vector<model::IterationLog> by_rank;
  };
  std::map<uint64_t, Iteration> steps;
  uint64_t bytes = 0;
};

// The logs of iterations from..to of the ranks p.rebuild_ranks under plan p.rebuild_plan, with the
// rows of `experts`, asked of every agent of p.slice_nodes in turn until each rank's iteration has
// come from one of them whole (a copy that fails its checksum is a note, and another agent's
// serves). Fails naming the first rank and iteration that no agent holds soundly.
Result<FetchedLogs> fetch_logs(zmq::context_t& ctx, const wire::PlanUpdate& p, const std::set<UnitId>& experts,
                               uint64_t from, uint64_t to, const ModelShape& shape, const SliceAccess& access,
                               int timeout_ms, std::vector<std::string>& notes, const std::function<bool()>& stopped);

}  // namespace sal::runtime
