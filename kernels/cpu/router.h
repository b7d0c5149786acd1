// router.h — moe-llama's router arithmetic around the top k, as operators (the model's, and the
// reference of kernels/cuda/router.h). N tokens, E experts, k chosen a token; scores [N,E] are the
// router's softmax or sigmoid of its logits z [N,E].
//   forward:  sigmoid scores; the combine weights from the chosen scores (renormalised over the k
//             when asked); sigmoid scores as a distribution for the balancing loss; each token's
//             logsumexp of z for the z-loss (lse^2);
//   backward: the scores' gradient (the combine weights' through the renormalisation, the Switch
//             balancing loss's alpha E f_e / tokens through q = s / sum s for sigmoid scores), and
//             the logits' (through the sigmoid or the softmax, plus the z-loss's 2 lse softmax(z)).
// And the gate of Qwen2-MoE's shared experts: a sigmoid per token scaling their output.
// Sums over a row run in double, in index order.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sal::kernels::cpu {

// s = 1 / (1 + exp(-z)), n elements (s may alias z).
void sigmoid_forward(const float* z, float* s, size_t n);

// w [N,K] = chosen / sum_j chosen (the sum in double) where `norm` and the sum > 0, else chosen.
void topk_weights(const float* chosen, float* w, int N, int K, bool norm);

// q [N,E] = s / sum_e s, row by row (the sum in double).
void normalise_rows(const float* s, float* q, int N, int E);

// lse [N] = log sum_e exp(z[t,e]) (max-subtracted, the sum in double).
void row_logsumexp(const float* z, float* lse, int N, int E);

// What the scores' gradient is made of.
struct RouterGrad {
  const float* scores = nullptr;  // [N,E]
  const float* chosen = nullptr;  // [N,K] the chosen experts' scores
  const float* w = nullptr;       // [N,K] their combine weights
  const int32_t* idx = nullptr;   // [N,K] the chosen experts
  const float* dw = nullptr;      // [N,K] the combine weights' gradient
  const double* f = nullptr;      // [E] the global batch's assignment fraction per expert
  double aux_scale = 0;           // the balancing loss's alpha E / global tokens (its share included)
  bool sigmoid = false;           // sigmoid scores (else softmax)
  bool norm = false;              // the combine weights renormalised over the k
};

// dscores [N,E] (overwritten).
void router_dscores(const RouterGrad& g, int N, int E, int K, float* dscores);

// dz [N,E] (overwritten) from dscores through the sigmoid or the softmax, plus the z-loss's
// z_scale * lse * exp(z - lse) where z_scale > 0 (z_scale = 2 weight / global tokens).
void router_dlogits(const float* z, const float* scores, const float* dscores, const float* lse, double z_scale,
                    bool sigmoid, int N, int E, float* dz);

// The shared experts' gate: g [N] = sigmoid(z [N]) and next [N,D] += g * out [N,D], row by row.
void shared_gate_forward(const float* z, const float* out, float* next, float* g, int N, int D);

// Its backward for the output gradient dy [N,D]: dout [N,D] = g * dy (the shared experts' output
// gradient) and dz [N] = (out . dy) g (1 - g) (the gate logit's).
void shared_gate_backward(const float* g, const float* out, const float* dy, float* dout, float* dz, int N, int D);

}  // namespace sal::kernels::cpu
