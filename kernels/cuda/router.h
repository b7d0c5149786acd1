// router.h — moe-llama's router arithmetic around the top k on the GPU: the operators of
// kernels/cpu/router.h on device pointers, and the top k of biased scores (model/router_bias.h's
// biased_topk). N tokens, E experts, k chosen a token. Row sums run in double in index order, one
// thread a row (the router's rows are a few to a few hundred experts), as the CPU sums them;
// results agree with the CPU's to float ulps (expf and the device's exp against libm's).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/context.h"

namespace sal::kernels::cuda {

// s = 1 / (1 + exp(-z)), n elements (s may alias z).
Status sigmoid_forward(const Context& ctx, const float* z, float* s, size_t n);

// The top k of scores + bias for each row of scores [N,E]: idx [N,k] (best first, ties by lower
// index, as topk) and chosen [N,k] their scores without the bias. bias [E] null: the top k of the
// scores. scratch: N*E floats of device memory when bias is given (else unused, may be null).
Status biased_topk(const Context& ctx, const float* scores, const float* bias, int N, int E, int K, int32_t* idx,
                   float* chosen, float* scratch);

// w [N,K] = chosen / sum_j chosen where `norm` and the sum > 0, else chosen (w may not alias chosen).
Status topk_weights(const Context& ctx, const float* chosen, float* w, int N, int K, bool norm);

// q [N,E] = s / sum_e s row by row (q may not alias s).
Status normalise_rows(const Context& ctx, const float* s, float* q, int N, int E);

// lse [N] = log sum_e exp(z[t,e]), max-subtracted.
Status row_logsumexp(const Context& ctx, const float* z, float* lse, int N, int E);

// What the scores' gradient is made of (device pointers; f in double, as the CPU holds it).
struct RouterGrad {
  const float* scores = nullptr;  // [N,E]
  const float* chosen = nullptr;  // [N,K]
  const float* w = nullptr;       // [N,K]
  const int32_t* idx = nullptr;   // [N,K]
  const float* dw = nullptr;      // [N,K]
  const double* f = nullptr;      // [E]
  double aux_scale = 0;
  bool sigmoid = false;
  bool norm = false;
};

// dscores [N,E] (overwritten), as kernels/cpu/router.h's router_dscores. Ids outside [0, E) add
// nothing.
Status router_dscores(const Context& ctx, const RouterGrad& g, int N, int E, int K, float* dscores);

// dz [N,E] (overwritten) from dscores through the sigmoid or the softmax, plus the z-loss's
// z_scale * lse * exp(z - lse) where z_scale > 0. dz may not alias the inputs.
Status router_dlogits(const Context& ctx, const float* z, const float* scores, const float* dscores,
                      const float* lse, double z_scale, bool sigmoid, int N, int E, float* dz);

// The shared experts' gate (Qwen2-MoE's): g [N] = sigmoid(z [N]), next [N,D] += g * out [N,D].
Status shared_gate_forward(const Context& ctx, const float* z, const float* out, float* next, float* g, int N, int D);

// dout [N,D] = g * dy and dz [N] = (out . dy, in double) g (1 - g). No aliasing.
Status shared_gate_backward(const Context& ctx, const float* g, const float* out, const float* dy, float* dout,
                            float* dz, int N, int D);

}  // namespace sal::kernels::cuda
