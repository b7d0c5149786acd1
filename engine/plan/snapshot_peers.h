// snapshot_peers.h — where the sparse snapshots (MoEtion) a rank writes are held: r nodes other
// than its own, chosen from the plan so that a slice does not live only where its operators live.
// A rank writes each non-expert unit if it is rank 0, and each expert of which it is the lowest
// holding rank (runtime/sparse_snapshots.h); losing every holder of an expert must not take every
// copy of its slices too — and neither must losing every node that holds none of them (a restore
// rolls the whole model back, so the surviving experts' windows are needed as much as the lost
// one's). So the peers of a rank alternate: first a node that holds none of the experts the rank
// writes, then one that holds some (another replica's node), and so on while both kinds last; among
// equals, the node already chosen by the fewest ranks (the copies spread), then the lowest
// position. A mesh with fewer than r other nodes gives all of them.
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
