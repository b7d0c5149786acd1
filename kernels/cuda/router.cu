// router.cu — see router.h. Elementwise parts are grid-stride loops; the row parts one thread a
// row, looping over the row in index order with double sums (the CPU's order and precision). The
// top k itself is softmax.h's topk, the unbiased scores gathered back with moe_gate.h's
// gather_weights.
#include "kernels/cuda/router.h"

#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/grid.cuh"
#include "kernels/cuda/moe_gate.h"
#include "kernels/cuda/softmax.h"

namespace sal::kernels::cuda {
namespace {

constexpr int kThreads = 256;

unsigned rows_grid(int N) { return unsigned((N + kThreads - 1) / kThreads); }

__global__ void sigmoid_kernel(const float* z, float* s, size_t n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += stride)
    s[i] = 1.0f / (1.0f + expf(-z[i]));
}

__global__ void add_row_bias_kernel(const float* __restrict__ x, const float* __restrict__ bias,
                                    float* __restrict__ y, size_t n, int E) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += stride) y[i] = x[i] + bias[i % size_t(E)];
}

__global__ void topk_weights_kernel(const float* __restrict__ chosen, float* __restrict__ w, int N, int K,
                                    bool norm) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= N) return;
  const float* c = chosen + size_t(t) * K;
  double sum = 0;
  for (int j = 0; j < K; ++j) sum += c[j];
  for (int j = 0; j < K; ++j) w[size_t(t) * K + j] = norm && sum > 0 ? float(c[j] / sum) : c[j];
}

__global__ void normalise_rows_kernel(const float* __restrict__ s, float* __restrict__ q, int N, int E) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= N) return;
  const float* r = s + size_t(t) * E;
  double sum = 0;
  for (int e = 0; e < E; ++e) sum += r[e];
  for (int e = 0; e < E; ++e) q[size_t(t) * E + e] = float(r[e] / sum);
}

__global__ void logsumexp_kernel(const float* __restrict__ z, float* __restrict__ lse, int N, int E) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= N) return;
  const float* r = z + size_t(t) * E;
  float mx = r[0];
  for (int e = 1; e < E; ++e) mx = r[e] > mx ? r[e] : mx;
  double s = 0;
  for (int e = 0; e < E; ++e) s += exp(double(r[e] - mx));
  lse[t] = mx + float(log(s));
}

__global__ void dscores_kernel(RouterGrad g, int N, int E, int K, float* __restrict__ dscores) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= N) return;
  const float* s = g.scores + size_t(t) * E;
  float* ds = dscores + size_t(t) * E;
  const float* w = g.w + size_t(t) * K;
  const float* dw = g.dw + size_t(t) * K;
  double sum = 0, dot = 0;
  for (int j = 0; j < K; ++j) sum += g.chosen[size_t(t) * K + j], dot += double(dw[j]) * w[j];
  if (g.sigmoid) {
    double all = 0, dq_dot_q = 0;
    for (int e = 0; e < E; ++e) all += s[e];
    for (int e = 0; e < E; ++e) dq_dot_q += g.aux_scale * g.f[e] * s[e] / all;
    for (int e = 0; e < E; ++e) ds[e] = float((g.aux_scale * g.f[e] - dq_dot_q) / all);
  } else {
    for (int e = 0; e < E; ++e) ds[e] = float(g.aux_scale * g.f[e]);
  }
  for (int j = 0; j < K; ++j) {
    const int e = g.idx[size_t(t) * K + j];
    if (e < 0 || e >= E) continue;
    const double dc = g.norm && sum > 0 ? (dw[j] - dot) / sum : dw[j];
    ds[e] += float(dc);
  }
}

__global__ void sigmoid_backward_kernel(const float* __restrict__ s, const float* __restrict__ ds,
                                        float* __restrict__ dz, size_t n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += stride)
    dz[i] = ds[i] * s[i] * (1.0f - s[i]);
}

// d/dz (z_weight lse^2) = z_scale lse softmax(z), added.
__global__ void z_loss_grad_kernel(const float* __restrict__ z, const float* __restrict__ lse, double z_scale,
                                   float* __restrict__ dz, size_t n, int E) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += stride) {
    const float l = lse[i / size_t(E)];
    dz[i] += float(z_scale * l * exp(double(z[i] - l)));
  }
}

// One thread a row: g, then the row scaled into next.
__global__ void shared_gate_forward_kernel(const float* __restrict__ z, const float* __restrict__ out,
                                           float* __restrict__ next, float* __restrict__ g, int N, int D) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= N) return;
  const float gt = 1.0f / (1.0f + expf(-z[t]));
  g[t] = gt;
  for (int i = 0; i < D; ++i) next[size_t(t) * D + i] += gt * out[size_t(t) * D + i];
}

__global__ void shared_gate_backward_kernel(const float* __restrict__ g, const float* __restrict__ out,
                                            const float* __restrict__ dy, float* __restrict__ dout,
                                            float* __restrict__ dz, int N, int D) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= N) return;
  const float gt = g[t];
  double dg = 0;
  for (int i = 0; i < D; ++i) {
    const size_t e = size_t(t) * D + i;
    dg += double(out[e]) * dy[e];
    dout[e] = gt * dy[e];
  }
  dz[t] = float(dg) * gt * (1.0f - gt);
}

Status bad(const char* fn, const std::string& what) { return invalid_argument(std::string(fn) + ": " + what); }

// N rows of `width` (the experts E, or the model width D).
Status check_rows(const char* fn, int N, int width, const char* name = "E") {
  if (N < 0 || width <= 0) return bad(fn, "N = " + std::to_string(N) + ", " + name + " = " + std::to_string(width));
  return {};
}

}  // namespace

Status sigmoid_forward(const Context& ctx, const float* z, float* s, size_t n) {
  if (n == 0) return {};
  if (!z || !s) return bad("sigmoid_forward", "null pointer argument");
  sigmoid_kernel<<<grid_for(ctx, n), kThreads, 0, ctx.stream()>>>(z, s, n);
  return launch_status("sigmoid_kernel");
}

Status biased_topk(const Context& ctx, const float* scores, const float* bias, int N, int E, int K, int32_t* idx,
                   float* chosen, float* scratch) {
  constexpr const char* fn = "biased_topk";
  SAL_CUDA_TRY(check_rows(fn, N, E));
  if (K < 1 || K > E || K > kTopKMax)
    return bad(fn, "k = " + std::to_string(K) + " with " + std::to_string(E) + " experts (1 <= k <= min(E, " +
                       std::to_string(kTopKMax) + "))");
  if (!bias) return topk(ctx, scores, N, E, K, idx, chosen);
  if (N == 0) return {};
  if (!scores || !scratch || !idx || !chosen) return bad(fn, "null pointer argument");
  const size_t n = size_t(N) * E;
  add_row_bias_kernel<<<grid_for(ctx, n), kThreads, 0, ctx.stream()>>>(scores, bias, scratch, n, E);
  SAL_CUDA_TRY(launch_status("add_row_bias_kernel"));
  SAL_CUDA_TRY(topk(ctx, scratch, N, E, K, idx, chosen));
  return gather_weights(ctx, scores, idx, N, K, E, chosen);
}

Status topk_weights(const Context& ctx, const float* chosen, float* w, int N, int K, bool norm) {
  constexpr const char* fn = "topk_weights";
  if (N < 0 || K <= 0) return bad(fn, "N = " + std::to_string(N) + ", K = " + std::to_string(K));
  if (N == 0) return {};
  if (!chosen || !w) return bad(fn, "null pointer argument");
  topk_weights_kernel<<<rows_grid(N), kThreads, 0, ctx.stream()>>>(chosen, w, N, K, norm);
  return launch_status("topk_weights_kernel");
}

Status normalise_rows(const Context& ctx, const float* s, float* q, int N, int E) {
  constexpr const char* fn = "normalise_rows";
  SAL_CUDA_TRY(check_rows(fn, N, E));
  if (N == 0) return {};
  if (!s || !q) return bad(fn, "null pointer argument");
  normalise_rows_kernel<<<rows_grid(N), kThreads, 0, ctx.stream()>>>(s, q, N, E);
  return launch_status("normalise_rows_kernel");
}

Status row_logsumexp(const Context& ctx, const float* z, float* lse, int N, int E) {
  constexpr const char* fn = "row_logsumexp";
  SAL_CUDA_TRY(check_rows(fn, N, E));
  if (N == 0) return {};
  if (!z || !lse) return bad(fn, "null pointer argument");
  logsumexp_kernel<<<rows_grid(N), kThreads, 0, ctx.stream()>>>(z, lse, N, E);
  return launch_status("logsumexp_kernel");
}

Status router_dscores(const Context& ctx, const RouterGrad& g, int N, int E, int K, float* dscores) {
  constexpr const char* fn = "router_dscores";
  SAL_CUDA_TRY(check_rows(fn, N, E));
  if (K <= 0) return bad(fn, "K = " + std::to_string(K));
  if (N == 0) return {};
  if (!g.scores || !g.chosen || !g.w || !g.idx || !g.dw || !g.f || !dscores) return bad(fn, "null pointer argument");
  dscores_kernel<<<rows_grid(N), kThreads, 0, ctx.stream()>>>(g, N, E, K, dscores);
  return launch_status("dscores_kernel");
}

Status router_dlogits(const Context& ctx, const float* z, const float* scores, const float* dscores,
                      const float* lse, double z_scale, bool sigmoid, int N, int E, float* dz) {
  constexpr const char* fn = "router_dlogits";
  SAL_CUDA_TRY(check_rows(fn, N, E));
  if (N == 0) return {};
  if (!scores || !dscores || !dz || (z_scale > 0 && (!z || !lse))) return bad(fn, "null pointer argument");
  const size_t n = size_t(N) * E;
  if (sigmoid) {
    sigmoid_backward_kernel<<<grid_for(ctx, n), kThreads, 0, ctx.stream()>>>(scores, dscores, dz, n);
    SAL_CUDA_TRY(launch_status("sigmoid_backward_kernel"));
  } else {
    SAL_CUDA_TRY(softmax_backward(ctx, scores, dscores, dz, N, E));
  }
  if (z_scale <= 0) return {};
  z_loss_grad_kernel<<<grid_for(ctx, n), kThreads, 0, ctx.stream()>>>(z, lse, z_scale, dz, n, E);
  return launch_status("z_loss_grad_kernel");
}

Status shared_gate_forward(const Context& ctx, const float* z, const float* out, float* next, float* g, int N, int D) {
  constexpr const char* fn = "shared_gate_forward";
  SAL_CUDA_TRY(check_rows(fn, N, D, "D"));
  if (N == 0) return {};
  if (!z || !out || !next || !g) return bad(fn, "null pointer argument");
  shared_gate_forward_kernel<<<rows_grid(N), kThreads, 0, ctx.stream()>>>(z, out, next, g, N, D);
  return launch_status("shared_gate_forward_kernel");
}

Status shared_gate_backward(const Context& ctx, const float* g, const float* out, const float* dy, float* dout,
                            float* dz, int N, int D) {
  constexpr const char* fn = "shared_gate_backward";
  SAL_CUDA_TRY(check_rows(fn, N, D, "D"));
  if (N == 0) return {};
  if (!g || !out || !dy || !dout || !dz) return bad(fn, "null pointer argument");
  shared_gate_backward_kernel<<<rows_grid(N), kThreads, 0, ctx.stream()>>>(g, out, dy, dout, dz, N, D);
  return launch_status("shared_gate_backward_kernel");
}

}  // namespace sal::kernels::cuda
