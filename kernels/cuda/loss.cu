// loss.cu — see loss.h. Forward: one block per row (threads stride over the vocabulary, so V = 50257
// is 100 elements a thread): the row max, exp into probs with the sum, scale by 1/sum; thread 0
// forms the row's loss in double into scratch. A one-block kernel then adds the rows as the CPU
// does: 32-row chunks summed in row order, the chunk sums added in chunk order, from 0.0.
// Backward: one block per row, elementwise.
#include "kernels/cuda/loss.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/cuda/reduce.cuh"

namespace sal::kernels::cuda {
namespace {

using reduce::ExpRow;
using reduce::exp_row;

constexpr int kMaxRowThreads = 512;
// Rows per chunk of the loss sum: kernels/cpu/loss.cpp's kLossRowChunk.
constexpr int kLossRowChunk = 32;
// Threads of the one-block loss sum (chunks summed per pass).
constexpr int kSumThreads = 256;

int row_threads(int n) { return reduce::row_threads(n, kMaxRowThreads); }

__global__ void cross_entropy_forward_kernel(const float* __restrict__ logits, const int32_t* __restrict__ targets,
                                             float* __restrict__ probs, int V, double* __restrict__ row_loss,
                                             int32_t* __restrict__ bad_targets) {
  const size_t row = blockIdx.x;
  const float* x = logits + row * V;
  float* p = probs + row * V;
  const ExpRow e = exp_row(x, p, V);
  const float mx = e.max, sum = e.sum;
  const float inv = 1.0f / sum;
  for (int i = threadIdx.x; i < V; i += blockDim.x) p[i] *= inv;
  if (threadIdx.x == 0) {
    const int32_t t = targets[row];
    double loss = 0.0;  // ignored rows add +0.0: the same sum as skipping them
    if (t >= V)
      atomicAdd(bad_targets, 1);  // an integer count: order-free
    else if (t >= 0)
      loss = double(mx) + log(double(sum)) - double(x[t]);
    row_loss[row] = loss;
  }
}

// One block of kSumThreads: per pass, thread j sums chunk base + j's rows in order; thread 0 then
// adds the pass's chunk sums in order.
__global__ void cross_entropy_sum_kernel(const double* __restrict__ row_loss, int M, double* __restrict__ loss_out) {
  __shared__ double chunk_sum[kSumThreads];
  const int chunks = (M + kLossRowChunk - 1) / kLossRowChunk;
  double total = 0.0;  // meaningful in thread 0
  for (int base = 0; base < chunks; base += kSumThreads) {  // block-uniform bound
    const int c = base + int(threadIdx.x);
    double s = 0.0;
    if (c < chunks) {
      const int r1 = min(M, (c + 1) * kLossRowChunk);
      for (int r = c * kLossRowChunk; r < r1; ++r) s += row_loss[r];
    }
    chunk_sum[threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
      const int n = min(kSumThreads, chunks - base);
      for (int j = 0; j < n; ++j) total += chunk_sum[j];
    }
    __syncthreads();  // chunk_sum is rewritten by the next pass
  }
  if (threadIdx.x == 0) *loss_out = total;
}

// dlogits = scale * (probs - onehot(t)); zero rows for t outside [0, V). Each thread reads and
// writes its own elements (no __restrict__: dlogits == probs would be safe).
__global__ void cross_entropy_backward_kernel(const float* probs, const int32_t* __restrict__ targets,
                                              float* dlogits, int V, float scale) {
  const size_t row = blockIdx.x;
  const float* p = probs + row * V;
  float* d = dlogits + row * V;
  const int32_t t = targets[row];
  if (t < 0 || t >= V) {
    for (int i = threadIdx.x; i < V; i += blockDim.x) d[i] = 0.0f;
    return;
  }
  for (int i = threadIdx.x; i < V; i += blockDim.x) d[i] = scale * (i == t ? p[i] - 1.0f : p[i]);
}

Status bad(const char* fn, const std::string& what) { return invalid_argument(std::string(fn) + ": " + what); }

}  // namespace

size_t cross_entropy_scratch_doubles(int M) { return M > 0 ? size_t(M) : 0; }

Status cross_entropy_forward(const Context& ctx, const float* logits, const int32_t* targets, float* probs, int M,
                             int V, double* loss_out, int32_t* bad_targets, double* scratch) {
  constexpr const char* fn = "cross_entropy_forward";
  if (M < 0) return bad(fn, "M = " + std::to_string(M));
  if (V < 0) return bad(fn, "V = " + std::to_string(V));
  if (!loss_out || !bad_targets) return bad(fn, "null loss_out or bad_targets");
  SAL_CUDA_TRY(cuda_status(int(cudaMemsetAsync(bad_targets, 0, sizeof(int32_t), ctx.stream())),
                           "cudaMemsetAsync (cross_entropy_forward bad_targets)"));
  if (M == 0 || V == 0)  // no rows, no loss (+0.0 is all-zero bytes)
    return cuda_status(int(cudaMemsetAsync(loss_out, 0, sizeof(double), ctx.stream())),
                       "cudaMemsetAsync (cross_entropy_forward loss_out)");
  if (!logits || !targets || !probs || !scratch) return bad(fn, "null pointer argument");
  if (probs == logits) return bad(fn, "probs aliases logits (the loss reads the logit after the softmax)");
  cross_entropy_forward_kernel<<<unsigned(M), row_threads(V), 0, ctx.stream()>>>(logits, targets, probs, V, scratch,
                                                                                  bad_targets);
  SAL_CUDA_TRY(launch_status("cross_entropy_forward_kernel"));
  cross_entropy_sum_kernel<<<1, kSumThreads, 0, ctx.stream()>>>(scratch, M, loss_out);
  return launch_status("cross_entropy_sum_kernel");
}

Status cross_entropy_backward(const Context& ctx, const float* probs, const int32_t* targets, float* dlogits,
                              int M, int V, float scale) {
  constexpr const char* fn = "cross_entropy_backward";
  if (M < 0) return bad(fn, "M = " + std::to_string(M));
  if (V < 0) return bad(fn, "V = " + std::to_string(V));
  if (M == 0 || V == 0) return {};
  if (!probs || !targets || !dlogits) return bad(fn, "null pointer argument");
  cross_entropy_backward_kernel<<<unsigned(M), row_threads(V), 0, ctx.stream()>>>(probs, targets, dlogits, V,
                                                                                   scale);
  return launch_status("cross_entropy_backward_kernel");
}

}  // namespace sal::kernels::cuda
