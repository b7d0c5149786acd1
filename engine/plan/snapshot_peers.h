// snapshot_peers.h — where the sparse snapshots (MoEtion) a rank writes are held: r nodes other
// than its own, chosen from the plan so that a slice does not live only where its operators live.
// A rank writes the units plan/unit_writers.h gives it (each expert by one of its holders); losing
// every holder of an expert must not take every copy of its slices too — and neither must losing
// every node that holds none of them (a restore rolls the whole model back, so the surviving
// experts' windows are needed as much as the lost one's — every rank's, the survivors' included).
// So a rank's copies go to nodes that share the fewest experts with each other: when they share
// none, losing every holder of any one expert leaves a copy. The first copy goes to a node that
// has such a partner (other than the rank's own node). Among equals, the peers alternate: first a
// node that holds none of the experts the rank writes, then one that holds some (another replica's
// node), and so on while both kinds last; then the node already chosen by the fewest ranks (the
// copies spread), then the lowest id; a node already holding two more ranks' copies than an even
// share is taken only when no other will do. (Before 2026-12-01 the alternation came first: after
// a regroup, some ranks' two copies sat on two holders of one expert, and losing that expert's
// holders lost the window — the job restored the seed.) When the job names racks (a rack fails
// with all its hosts), the racks come first: each copy goes to the rack holding the fewest copies
// yet, away from the writer's rack, so that no rack lost takes every copy. A mesh with fewer than
// r other nodes gives all of them.
//
// After a patch (SPARe's degraded steps) some ranks of the plan are lost: the survivors write their
// units (plan/unit_writers.h, the lost ranks absent) and their copies go to the nodes still up, the
// same rules over what is left — the lost ranks' nodes hold no copy and count as holding nothing.
//
// The same peers hold the rank's upstream logs (model/expert_replay.h), which a rebuild needs when
// any expert the rank sends rows to loses every holder — the rank's own among them, and it may die
// with them. So "apart" means, first, holding none of the experts the rank *holds* (a rank that
// writes none still holds some), then none it writes; and "beside", holding some it writes, then
// some it holds.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "plan/plan.h"

namespace sal::plan {

// peers[rank]: the node ids holding that rank's slices. `node_of_rank[rank]` is the node each
// plan position runs on (several ranks may share a node); `rack_of`: the rack of each node named in
// one (mesh.racks), a node in none is a rack of its own. `lost`: the plan's ranks a patch lost
// (ascending); they get no peers.
std::vector<std::vector<uint32_t>> snapshot_peers(const Plan& plan, const std::vector<uint32_t>& node_of_rank,
                                                  uint32_t copies, const std::map<uint32_t, std::string>& rack_of = {},
                                                  const std::vector<uint32_t>& lost = {});

}  // namespace sal::plan
