// bench_kernels.cpp — throughput of the CPU operator kernels (kernels/cpu/ops.h) at the shapes of a
// d = 256 moe-gpt step (2048 tokens: batch 16 x 128), with 1 and 2 threads. Prints a markdown table:
// GEMMs and attention in GFLOP/s, the memory-bound kernels in GB/s of their minimal traffic (each
// input read once, each output written once). Peer rows: the same GEMM through OpenBLAS's own
// threading (one call, openblas_set_num_threads(t)) beside our tiles-over-the-pool; GELU and softmax
// written with libm's tanhf / expf in a plain loop (single-threaded), as straightforward C++ would.
// "expert MLP" is one expert's forward + backward as engine/model runs it (6 GEMMs, bias, GELU).
//
//   bench_kernels [seconds per measurement, default 0.3]
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/ops.h"

namespace k = sal::kernels::cpu;

namespace {

using Vec = std::vector<float>;
using Clock = std::chrono::steady_clock;

// Model shapes: tokens N = B*T, width D, hidden F = 4D, heads H, vocabulary V.
constexpr int kB = 16, kT = 128, kD = 256, kF = 4 * kD, kH = 4, kV = 256, kN = kB * kT;
constexpr int kAttB = 8;  // attention batch of the benchmark (B=8, T=128, C=256, H=4)
constexpr int kThreadCounts[] = {1, 2};
constexpr int kBatches = 3;  // best of this many timed batches (the machine is shared and noisy)

Vec randn(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  Vec v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Seconds per call of f: a few warm-up calls, then the best of kBatches batches of ~budget/kBatches.
double time_call(const std::function<void()>& f, double budget) {
  for (int i = 0; i < 3; ++i) f();
  double best = 1e30;
  for (int b = 0; b < kBatches; ++b) {
    int iters = 0;
    const auto t0 = Clock::now();
    double elapsed = 0;
    do {
      f();
      ++iters;
      elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    } while (elapsed < budget / kBatches);
    best = std::min(best, elapsed / iters);
  }
  return best;
}

struct Case {
  std::string name, shape, unit;
  double work;  // flops or bytes per call
  std::function<void()> run;
  bool threaded = true;  // false: a single-threaded peer, timed once
};

// Peers: the obvious loops over libm.
void gelu_libm(const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i)
    y[i] = 0.5f * x[i] * (1.0f + std::tanh(0.7978845608f * (x[i] + 0.044715f * x[i] * x[i] * x[i])));
}
void softmax_libm(const float* x, float* y, int M, int N) {
  for (int m = 0; m < M; ++m) {
    const float* xr = x + size_t(m) * N;
    float* yr = y + size_t(m) * N;
    const float mx = *std::max_element(xr, xr + N);
    float sum = 0;
    for (int i = 0; i < N; ++i) sum += (yr[i] = std::exp(xr[i] - mx));
    for (int i = 0; i < N; ++i) yr[i] /= sum;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const double budget = argc > 1 ? std::atof(argv[1]) : 0.3;

  // Buffers (sized for the largest use of each).
  Vec x = randn(size_t(kN) * kF, 1), w = randn(size_t(kN) * kF, 2), y(size_t(kN) * kF), dy = randn(size_t(kN) * kF, 3);
  Vec qkv = randn(size_t(kAttB) * kT * 3 * kD, 4), att(size_t(kAttB) * kT * kD), dqkv(qkv.size());
  Vec probs(size_t(kAttB) * kH * kT * kT), datt = randn(att.size(), 5);
  Vec gamma = randn(kD, 6), beta = randn(kD, 7), mean(kN), rstd(kN), dg(kD), db(kD);
  std::vector<int32_t> targets(kN);
  for (int i = 0; i < kN; ++i) targets[i] = (i * 31) % kV;
  const size_t n_opt = size_t(4) << 20;  // 4M parameters
  Vec p = randn(n_opt, 8), g = randn(n_opt, 9), m(n_opt, 0.0f), v(n_opt, 0.0f);

  auto gemm_case = [&](const char* what, bool ta, bool tb, int M, int N, int K) {
    char shape[96];
    std::snprintf(shape, sizeof shape, "%s%d x %d x %d", what, M, N, K);
    return Case{"gemm " + std::string(ta ? "T" : "N") + (tb ? "T" : "N"), shape, "GFLOP/s", 2.0 * M * N * K,
                [=, &x, &w, &y] { k::gemm(ta, tb, M, N, K, 1.0f, x.data(), w.data(), 0.0f, y.data()); }};
  };
  // OpenBLAS threading itself, for the peer row; the kernels keep OpenBLAS at one thread otherwise.
  auto blas_threaded = [&](int M, int N, int K) {
    openblas_set_num_threads(k::num_threads());
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, x.data(), K, w.data(), N, 0.0f, y.data(), N);
    openblas_set_num_threads(1);
  };
  // One expert, forward and backward: h = x W1 + b1, a = gelu(h), out = a W2 + b2, then the grads.
  Vec h(size_t(kN) * kF), a(size_t(kN) * kF), da(size_t(kN) * kF), dw1(size_t(kD) * kF), dw2(size_t(kF) * kD);
  Vec b1(kF), b2(kD), db1(kF), db2(kD);
  auto expert = [&] {
    k::gemm(false, false, kN, kF, kD, 1.0f, x.data(), w.data(), 0.0f, h.data());
    k::add_bias(h.data(), b1.data(), kN, kF);
    k::gelu_forward(h.data(), a.data(), h.size());
    k::gemm(false, false, kN, kD, kF, 1.0f, a.data(), w.data(), 0.0f, y.data());
    k::add_bias(y.data(), b2.data(), kN, kD);
    k::gemm(true, false, kF, kD, kN, 1.0f, a.data(), dy.data(), 1.0f, dw2.data());
    k::bias_grad(dy.data(), db2.data(), kN, kD);
    k::gemm(false, true, kN, kF, kD, 1.0f, dy.data(), w.data(), 0.0f, da.data());
    k::gelu_backward(h.data(), da.data(), da.data(), da.size());
    k::gemm(true, false, kD, kF, kN, 1.0f, x.data(), da.data(), 1.0f, dw1.data());
    k::bias_grad(da.data(), db1.data(), kN, kF);
    k::gemm(false, true, kN, kD, kF, 1.0f, da.data(), w.data(), 0.0f, y.data());
  };
  const double att_flops = 2.0 * 2.0 * kAttB * kT * kT * kD;  // QK^T and PV, dense-equivalent
  const size_t n_act = size_t(kN) * kF;                        // the expert hidden layer, [N, 4D]
  const double md = double(kN) * kD * 4;                       // bytes of one [N, D] float tensor

  std::vector<Case> cases = {
      gemm_case("up: ", false, false, kN, kF, kD),
      {"gemm NN, OpenBLAS-threaded peer", "up: 2048 x 1024 x 256", "GFLOP/s", 2.0 * kN * kF * kD,
       [&] { blas_threaded(kN, kF, kD); }},
      gemm_case("down: ", false, false, kN, kD, kF),
      gemm_case("qkv: ", false, false, kN, 3 * kD, kD),
      gemm_case("dW up: ", true, false, kD, kF, kN),
      gemm_case("dx up: ", false, true, kN, kD, kF),
      {"attention fwd", "B8 T128 C256 H4", "GFLOP/s", att_flops,
       [&] { k::attention_forward(qkv.data(), att.data(), probs.data(), kAttB, kT, kD, kH); }},
      {"attention bwd", "B8 T128 C256 H4", "GFLOP/s", 2 * att_flops,
       [&] { k::attention_backward(datt.data(), qkv.data(), probs.data(), dqkv.data(), kAttB, kT, kD, kH); }},
      {"layernorm fwd", "2048 x 256", "GB/s", 2 * md,
       [&] { k::layernorm_forward(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(), kN, kD); }},
      {"layernorm bwd", "2048 x 256", "GB/s", 3 * md,
       [&] {
         k::layernorm_backward(dy.data(), x.data(), gamma.data(), mean.data(), rstd.data(), y.data(), dg.data(),
                               db.data(), kN, kD);
       }},
      {"gelu fwd", "2048 x 1024", "GB/s", 8.0 * n_act, [&] { k::gelu_forward(x.data(), y.data(), n_act); }},
      {"gelu fwd, libm peer", "2048 x 1024", "GB/s", 8.0 * n_act, [&] { gelu_libm(x.data(), y.data(), n_act); },
       false},
      {"gelu bwd", "2048 x 1024", "GB/s", 12.0 * n_act,
       [&] { k::gelu_backward(x.data(), dy.data(), y.data(), n_act); }},
      {"softmax fwd", "2048 x 256", "GB/s", 2 * md, [&] { k::softmax_forward(x.data(), y.data(), kN, kV); }},
      {"softmax fwd, libm peer", "2048 x 256", "GB/s", 2 * md, [&] { softmax_libm(x.data(), y.data(), kN, kV); },
       false},
      {"softmax bwd", "2048 x 256", "GB/s", 3 * md,
       [&] { k::softmax_backward(y.data(), dy.data(), w.data(), kN, kV); }},
      {"softmax fwd (gate)", "2048 x 8", "GB/s", 2.0 * kN * 8 * 4, [&] { k::softmax_forward(x.data(), y.data(), kN, 8); }},
      {"cross-entropy fwd", "2048 x 256", "GB/s", 2 * md,
       [&] { k::cross_entropy_forward(x.data(), targets.data(), y.data(), kN, kV); }},
      {"expert MLP fwd+bwd", "2048 tok, d 256", "GFLOP/s", 6 * 2.0 * kN * kD * kF, expert},
      {"adamw", "4M params", "GB/s", 28.0 * n_opt,
       [&] { k::adamw(p.data(), g.data(), m.data(), v.data(), n_opt, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 10); }},
  };

  std::printf("# CPU kernels (kernels/cpu), %s\n\n", openblas_get_config());
  std::printf("| kernel | shape | unit | 1 thread | 2 threads |\n|---|---|---|---|---|\n");
  for (const Case& c : cases) {
    std::string cols;
    double single = 0;
    for (int t : kThreadCounts) {
      char cell[32];
      if (!c.threaded && t > 1) {
        std::snprintf(cell, sizeof cell, " (%.1f) |", single);  // a peer: the 1-thread figure again
      } else {
        k::set_threads(t);
        single = c.work / time_call(c.run, budget) * 1e-9;
        std::snprintf(cell, sizeof cell, " %.1f |", single);
      }
      cols += cell;
    }
    std::printf("| %s | %s | %s |%s\n", c.name.c_str(), c.shape.c_str(), c.unit.c_str(), cols.c_str());
    std::fflush(stdout);
  }
  std::printf("\nattention: dense-equivalent flops (4·B·T²·C forward, twice that backward); the causal\n"
              "mask lets the kernel skip part of them. GB/s: minimal traffic (inputs read once, outputs\n"
              "written once). Peer rows are single-threaded; the 2-thread column repeats them in ().\n");
  return 0;
}
