// unit_writers.h — which ranks of a plan write each unit: into a dense snapshot, a sparse
// snapshot's slot (MoEtion) or the final checkpoint. Each unit is written by `copies` of the ranks
// holding it (all of them when fewer hold it), the ranks named absent left out, and the writing is
// spread: each expert goes to its holders that write the fewest experts so far (the experts with
// the fewest holders first), then each non-expert unit — every rank holds those — to the ranks that
// write the fewest bytes so far (the largest unit first). Ties go to the lower rank.
//
// Before, rank 0 wrote every non-expert unit and each expert went to its lowest holder: in a grouped
// job where every worker holds every expert, rank 0 wrote everything, every step, and its copies and
// checksums made it the slowest rank of every step (throttled in 84 % of its CPU periods at 0.225
// CPU, the others in 17 %).
//
// A pure function of the plan: every rank computes the same answer, and so does the controller
// where it chooses the peers that hold a rank's slots (snapshot_peers.h).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "plan/plan.h"

namespace sal::plan {

// holders[layer][expert]: the ranks holding a replica of that expert, ascending, each once.
using ExpertHolders = std::vector<std::vector<std::vector<uint32_t>>>;

// The holders of each expert in `plan` (its positions are the ranks).
ExpertHolders expert_holders(const Plan& plan);

struct WriteRequest {
  uint32_t ranks = 0;                 // the plan's ranks; each holds every non-expert unit
  size_t copies = 1;                  // writers of each unit
  std::vector<uint32_t> absent;       // ranks that write nothing (gone)
  uint64_t expert_bytes = 1;          // the size of one expert (all are alike)
  std::vector<uint64_t> dense_bytes;  // the size of each non-expert unit, in the caller's order
};

struct UnitWriters {
  std::vector<std::vector<std::vector<uint32_t>>> experts;  // [layer][expert]: its writers, ascending
  std::vector<std::vector<uint32_t>> dense;                  // [non-expert unit]: its writers, ascending
  std::vector<uint64_t> bytes;                               // [rank]: the bytes it writes
};

UnitWriters unit_writers(const ExpertHolders& holders, const WriteRequest& request);

// The experts (layer, expert) rank `rank` writes into its sparse slots (one copy each, the `absent`
// ranks left out).
std::vector<std::pair<int, int>> experts_written(const Plan& plan, uint32_t rank,
                                                 const std::vector<uint32_t>& absent = {});

}  // namespace sal::plan
