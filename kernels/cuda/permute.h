// permute.h — the MoE token permute / un-permute with the gate-weighted combine, on one rank, on
// the GPU. It mirrors the CPU path (engine/runtime/exchange.cpp, engine/model/moe_gpt.cpp):
//
// Assignment a = t*k + j sends token t to expert idx[a] (the top-k ids [tokens, k]). An expert's
// local assignments are taken in slot order (a ascending) and dealt out destination by destination
// in worker order: the first send[e][rank][0] of them go to worker 0, the next send[e][rank][1] to
// worker 1, and so on (the kept ones, to `rank` itself, are simply the block for i == rank). The
// send buffer [tokens*k, d] is destination-major, then expert, then slot order — exactly what
// DistributedExchange::send_rows packs — so permute_rows gives each assignment its row there:
//   row(a) = start(i) + sum_{e' < e} send[e'][rank][i] + (rank of a among e's slots - C(e, i)),
// with start(i) the rows for destinations before i and C(e, i) = sum_{i' < i} send[e][rank][i'].
// The rows are computed in parallel and deterministically: a per-expert stable counting sort over
// chunks of assignments (per-chunk counts, exclusive prefix sums over chunks, warp-level ranks
// within a chunk), then a binary search of C(e, .) for the destination.
//
// An assignment whose expert id is outside [0, experts), or beyond what the schedule sends from
// this rank for its expert (only when the schedule was not computed from these ids), gets row -1;
// every data kernel here treats a row outside [0, tokens*k) as absent (not copied, contributes 0).
// With a schedule computed from these ids (flexible_dispatch over count_assignments), rows is a
// permutation of [0, tokens*k).
//
// One rank's MoE step on the GPU: count_assignments (its column of the token counts) -> all-gather
// -> flexible_dispatch (dispatch.h) -> dispatch_row_counts (the all-to-all-v sizes) ->
// permute_rows -> permute -> all-to-all-v -> experts -> all-to-all-v back -> unpermute_combine.
// The rows arrive source-major then expert (runtime/exchange.cpp), so an expert's rows form one
// segment per source; regrouping them per expert, if the GEMMs want that, is not done here.
//
// The returned rows y come back in the same layout (all-to-all-v reversed), so the combine reads
// them through the same rows. All reductions run in a fixed order (over j, then a fixed warp tree),
// so results are bitwise reproducible. Row copies are warp-per-row and use 16-byte accesses when
// d % 4 == 0 and the pointers are aligned.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/context.h"

namespace sal::kernels::cuda {

constexpr int kMaxTopK = 8;
constexpr int kMaxPermuteExperts = 1024;
// Most assignments (tokens * k) one call takes.
constexpr int64_t kMaxAssignments = int64_t(1) << 30;

// counts[e] = how many of idx[0, tokens*k) equal e: this worker's column of the dispatch's token
// counts, to be all-gathered. Ids outside [0, experts) are not counted. Overwrites counts[experts].
Status count_assignments(const Context& ctx, const int32_t* idx, int tokens, int k, int experts, uint32_t* counts);

// Device scratch (bytes) that permute_rows needs for these sizes.
size_t permute_workspace_bytes(int tokens, int k, int experts, int workers);

// rows[t*k + j] (overwritten, [tokens*k] int32): the send-buffer row of assignment (t, j), or -1
// (see above). send is the schedule [experts][workers][workers] (flexible_dispatch); rank is this
// worker. workspace: at least permute_workspace_bytes(...) bytes of device memory, 8-byte aligned.
Status permute_rows(const Context& ctx, const int32_t* idx, int tokens, int k, const uint32_t* send, int experts,
                    int workers, int rank, int32_t* rows, void* workspace, size_t workspace_bytes);

// send_buf[rows[t*k + j]] = x[t] for every assignment with a row; x is [tokens, d], send_buf
// [tokens*k, d] (only rows that some assignment names are written). The bf16 overload rounds to
// nearest even (the expert GEMMs take bf16 operands).
Status permute(const Context& ctx, const float* x, const int32_t* rows, int tokens, int k, int d, float* send_buf);
Status permute(const Context& ctx, const float* x, const int32_t* rows, int tokens, int k, int d, Bf16* send_buf);

// out[t] = sum_j w[t*k + j] * y[rows[t*k + j]], j = 0..k-1 in order (absent rows skipped);
// y is [tokens*k, d] in send-buffer layout, w [tokens, k], out [tokens, d] (overwritten).
Status unpermute_combine(const Context& ctx, const float* y, const int32_t* rows, const float* w, int tokens, int k,
                         int d, float* out);

// The combine's backward: d_rows[rows[a]] = w[a] * d_out[t] ([tokens*k, d], send-buffer layout:
// what goes back to the experts; only rows some assignment names are written) and
// d_w[a] = dot(d_out[t], y[rows[a]]) ([tokens, k]; 0 for an absent row), a = t*k + j.
Status unpermute_combine_backward(const Context& ctx, const float* d_out, const float* y, const int32_t* rows,
                                  const float* w, int tokens, int k, int d, float* d_rows, float* d_w);

// The permute's backward: dx[t] = sum_j d_send[rows[t*k + j]], j in order (absent rows skipped);
// d_send [tokens*k, d] in send-buffer layout, dx [tokens, d] (overwritten).
Status permute_backward(const Context& ctx, const float* d_send, const int32_t* rows, int tokens, int k, int d,
                        float* dx);

}  // namespace sal::kernels::cuda
