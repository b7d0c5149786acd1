// dispatch.h — the flexible token dispatcher's schedule (Lazarus Algorithm 1) on the GPU. It computes
// exactly the integers of sal::runtime::flexible_dispatch (engine/runtime/dispatch.h), which is the
// reference: each expert's tokens are shared evenly over its replica units (ordered by worker, then
// unit; the remainder to the first units), every worker keeps min(its tokens, its quota) of its own
// tokens, and the surplus goes to spare quota by the north-west corner rule in worker order.
//
// The north-west corner walk is sequential, but its result has a closed form that is parallel:
// source j's surplus occupies [S_j, S_j + s_j) of the cumulative surplus and sink i's spare
// occupies [P_i, P_i + p_i) of the cumulative spare (S, P exclusive prefix sums in worker order);
// the walk moves exactly the overlap of the two intervals from j to i. So one block per expert
// computes the quotas and the two prefix sums, and every entry of send is one overlap.
//
// Layouts (row-major, device memory): tokens[e][j] and units[e][j] are [experts][workers] (note
// that an all-gather of per-worker counts gives [workers][experts]: transpose first);
// send[e][j][i] is [experts][workers][workers], the tokens of e that worker j sends to worker i
// (i == j: kept); quota[e][j] is [experts][workers]. Preconditions shared with the CPU code:
// an expert's total tokens fit in 32 bits.
#pragma once

#include <cstdint>

#include "kernels/cuda/context.h"

namespace sal::kernels::cuda {

// Largest worker count the schedule kernel takes (its per-expert prefix sums live in shared memory).
constexpr int kMaxDispatchWorkers = 1024;

// send and quota as above (overwritten). *bad_expert (one device int) becomes -1, or the lowest
// expert that has tokens but no replica unit (the CPU call fails there); that expert's send and
// quota entries are all 0. bad_expert is written even when experts or workers is 0. Needs
// 1 <= workers <= kMaxDispatchWorkers when experts > 0.
Status flexible_dispatch(const Context& ctx, const uint32_t* tokens, const uint32_t* units, int experts, int workers,
                         uint32_t* send, uint32_t* quota, int* bad_expert);

// What the all-to-all-v of worker `rank` needs, from a schedule on device:
// send_rows[i] = sum_e send[e][rank][i] (rows it sends to i), recv_rows[j] = sum_e send[e][j][rank]
// (rows it receives from j); both [workers] int64 on device, overwritten.
Status dispatch_row_counts(const Context& ctx, const uint32_t* send, int experts, int workers, int rank,
                           int64_t* send_rows, int64_t* recv_rows);

}  // namespace sal::kernels::cuda
