// moe_gate.h — the small kernels the moe-gpt model on the GPU (engine/model/cuda) needs around its
// MoE gate and residual stream, which kernels/cpu has no operator for because the CPU model writes
// them as plain loops in engine/model/moe_gpt.cpp:
//   column_sums_f64  the gate probabilities summed per expert (the balancing loss's statistics), in
//                    double as the CPU sums them;
//   gate_dprobs      the gradient reaching the gate probabilities: the balancing loss's constant
//                    per expert plus each chosen expert's d(combine weight), added in the CPU's order;
//   gather_weights   combine weights of a routing that did not come from topk (forced routing);
//   add              the residual additions.
// All deterministic (fixed order, no float atomics); gate_dprobs, gather_weights and add give the
// CPU's bits exactly.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/context.h"

namespace sal::kernels::cuda {

// out[n] = sum over m of x[m, n], accumulated in double (overwrites out [N]; zeros when M == 0).
// x [M, N]. Rows are added in a fixed order (each of kColSumLanes lanes takes every
// kColSumLanes-th row in order, then the lanes in order), so the result is the same bits every run;
// it differs from the CPU's row-by-row double sum only by reassociation (~1e-16 relative).
constexpr int kColSumLanes = 16;
Status column_sums_f64(const Context& ctx, const float* x, int M, int N, double* out);

// The gate probabilities' gradient (overwrites dprobs [tokens, experts]):
//   dprobs[t, e] = aux[e], then for j = 0..k-1 in order: += dw[t*k + j] where idx[t*k + j] == e.
// aux [experts] (the balancing loss's d/dP, formed on the host), idx and dw [tokens, k]. Ids outside
// [0, experts) add nothing. Needs 1 <= k <= 16 (softmax.h's kTopKMax) when tokens > 0.
Status gate_dprobs(const Context& ctx, const float* aux, const int32_t* idx, const float* dw, int tokens, int k,
                   int experts, float* dprobs);

// w[t*k + j] = probs[t, idx[t*k + j]] (overwrites w [tokens, k]; 0 for an id outside [0, experts)).
// probs [tokens, experts].
Status gather_weights(const Context& ctx, const float* probs, const int32_t* idx, int tokens, int k, int experts,
                      float* w);

// y[i] = a[i] + b[i], n elements (y may alias a or b: each element is read, then written, by one
// thread).
Status add(const Context& ctx, const float* a, const float* b, float* y, size_t n);

}  // namespace sal::kernels::cuda
