// snapshot_peers.h — where the sparse snapshots (MoEtion) a rank writes are held: r nodes other
// than its own, chosen from the plan so that a slice does not live only where its operators live.
// A rank writes each non-expert unit if it is rank 0, and each expert of which it is the lowest
// holding rank (runtime/sparse_snapshots.h); losing every holder of an expert must not take every
// copy of its slices too. So the peers of a rank are, in order of preference: nodes that hold none
// of the experts the rank writes, then the others; among equals, the node already chosen by the
// fewest ranks (the copies spread), then the lowest position. A mesh with fewer than r other nodes
// gives all of them.
#pragma once

#include <cstdint>
#include <vector>

#include "plan/plan.h"

namespace sal::plan {

// peers[rank]: the node ids holding that rank's slices. `node_of_rank[rank]` is the node each
// plan position runs on (several ranks may share a node).
std::vector<std::vector<uint32_t>> snapshot_peers(const Plan& plan, const std::vector<uint32_t>& node_of_rank,
                                                  uint32_t copies);

// The experts (layer, expert) a rank writes: those of which it is the lowest holding position.
std::vector<std::pair<int, int>> experts_written(const Plan& plan, uint32_t rank);

}  // namespace sal::plan
