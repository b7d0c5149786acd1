// dispatch.h — the flexible token dispatcher (Lazarus Algorithm 1), as an integer schedule that
// every worker computes identically from the all-gathered token counts.
//
// Input: T[e][j], the tokens on worker j routed to expert e this step, and R[e][j], the replica
// units of e on worker j (several replicas of one expert on one worker are several units: more
// capacity there). Each expert's tokens are shared evenly over its units: unit u of the R_e units
// (ordered by worker, then unit) gets floor(total_e / R_e) tokens, the first total_e mod R_e units
// one more — so every unit's load is within one token of even. A worker's quota for e is the sum
// of its units'. Each worker keeps min(T[e][j], quota) of its own tokens (local first); the rest
// (its surplus) goes to workers with spare quota. Surplus and spare add up to the same number, and
// they are matched by walking sources and sinks in worker order (the north-west corner rule), which
// gives every sink exactly its spare — proportion to spare capacity, in integers, with send and
// receive counts that agree by construction.
//
// Weighted (the health policy's shares: a slow worker gets fewer of an expert's tokens): each unit's
// part is in proportion to its worker's weight instead of even (core/apportion.h: with equal
// weights the split above, exactly). Without weights, even.
//
// By this step's counts (Split::counts, train.dispatch = "counts"): the quotas are
// core/expert_split.h's balanced split instead — each expert's tokens go to the least loaded of
// its holders given the other experts' (never a busier peak than even). The rest is the same.
//
// Output: S[e][j][i], the tokens of e that worker j sends to worker i (i == j: kept).
#pragma once

#include <cstdint>
#include <vector>

#include "comm/collectives.h"
#include "core/result.h"

namespace sal::runtime {

using Counts = std::vector<std::vector<uint32_t>>;  // [expert][worker]

// How each expert's tokens are split over its replicas: evenly (Lazarus), or balanced by the step's
// counts over all the layer's experts.
enum class Split { even, counts };

struct DispatchSchedule {
  int experts = 0, workers = 0;
  // send[e][j][i]: tokens of expert e that worker j sends to worker i.
  std::vector<std::vector<std::vector<uint32_t>>> send;
  // quota[e][j]: tokens of expert e that worker j computes (== sum over j' of send[e][j'][j]).
  Counts quota;
  Counts tokens;  // tokens[e][j]: the counts it was made from (expert e's tokens on worker j)

  uint32_t sent(int e, int from, int to) const { return send[size_t(e)][size_t(from)][size_t(to)]; }
  // Tokens (over all experts) worker `from` sends to worker `to`.
  uint64_t total(int from, int to) const;
};

// Errors when the shapes disagree or an expert with tokens has no replica (or, weighted, only
// replicas of weight 0). `weights`: one per worker, or empty (even).
Result<DispatchSchedule> flexible_dispatch(const Counts& tokens, const Counts& units,
                                           const std::vector<uint32_t>& weights = {}, Split split = Split::even);

// FNV-1a over a replica table (its shape and every entry), the weights, if any, the split when it
// is not even and whether experts are shadowed (shadows.h): what ranks compare to know they
// dispatch alike. Never 0.
uint64_t replicas_digest(const Counts& units, const std::vector<uint32_t>& weights = {}, Split split = Split::even,
                         bool shadows = false);

// A layer's schedule from this rank's token counts (counts[e]), as every rank of `comm` computes
// it: one all-gather of each rank's counts with the digest of the replica table it dispatches with,
// a check that every digest agrees, then flexible_dispatch. Ranks with the same counts and table
// compute the same schedule, so the all-to-all sizes they derive from it match — which is why the
// plan's data plane need not all-gather the sizes before every all-to-all (collectives.h,
// GlooOptions::verify_counts). Errors name the rank whose table differs.
Result<DispatchSchedule> gather_schedule(comm::Collectives& comm, const std::vector<uint32_t>& counts,
                                         const Counts& units, const std::vector<uint32_t>& weights = {},
                                         Split split = Split::even, bool shadows = false);

}  // namespace sal::runtime
