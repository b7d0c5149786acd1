// test_llama_ops.cpp — the GPU kernels of the moe-llama family against their kernels/cpu references
// (the operators the CPU model calls): RMSNorm, rotary positions, SwiGLU, grouped-query attention's
// key/value heads, and the router's pieces (sigmoid scores, the biased top k, the combine weights,
// the normalised scores, logsumexp, the scores' and logits' gradients). Random inputs over several
// shapes, outputs poisoned with NaN first (an element a kernel forgot fails), accumulating outputs
// started from random values (a kernel that overwrites fails); the column sums run twice and must
// give the same bits; bad arguments must come back as errors.
//
// Tolerances as test_elementwise.cpp's: fp32 within kFp32Tol in relative 2-norm and no element
// off by more than kWorstTol; where the GPU does the CPU's operations in the CPU's order (the
// heads' copies and sums, the top k of the biased scores) the comparison is exact.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/heads.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/router.h"
#include "kernels/cpu/softmax.h"
#include "kernels/cuda/activation.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/heads.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/router.h"
#include "kernels/cuda/softmax.h"
#include "kernels/cuda/swiglu_experts.h"

namespace {

namespace k = sal::kernels::cpu;
namespace kc = sal::kernels::cuda;
using namespace sal::test::gpu;
using Vec = std::vector<float>;

struct RowShape {
  int M, N;
};
// One row; widths that are not multiples of a warp; more than one block's threads per row; many
// rows (the column pass cut into many chunks, the last short).
const RowShape kRmsShapes[] = {{1, 1}, {1, 7}, {3, 32}, {5, 100}, {17, 768}, {130, 33}, {3000, 40}, {4, 1000}};
constexpr float kEps = 1e-6f;

TEST_CASE("cuda rmsnorm forward matches the CPU") {
  for (RowShape s : kRmsShapes) {
    CAPTURE(s.M);
    CAPTURE(s.N);
    const size_t mn = size_t(s.M) * s.N;
    const Vec x = randn(mn, 101, 3.0f), gamma = randn(s.N, 102);
    Vec y_ref(mn), rstd_ref(s.M);
    k::rmsnorm_forward(x.data(), gamma.data(), y_ref.data(), rstd_ref.data(), s.M, s.N, kEps);
    auto dx = to_device(x);
    auto dg = to_device(gamma);
    auto dy = poisoned<float>(mn);
    auto drstd = poisoned<float>(s.M);
    SAL_CHECK_OK(kc::rmsnorm_forward(ctx(), dx.get(), dg.get(), dy.get(), drstd.get(), s.M, s.N, kEps));
    check_close(to_host(dy), y_ref, "rmsnorm y");
    check_close(to_host(drstd), rstd_ref, "rmsnorm rstd");
    // in place, as the QK-norm's callers may
    SAL_CHECK_OK(kc::rmsnorm_forward(ctx(), dx.get(), dg.get(), dx.get(), drstd.get(), s.M, s.N, kEps));
    check_close(to_host(dx), y_ref, "rmsnorm y in place");
  }
}

TEST_CASE("cuda rmsnorm backward matches the CPU, accumulates its gain and is deterministic") {
  for (RowShape s : kRmsShapes) {
    CAPTURE(s.M);
    CAPTURE(s.N);
    const size_t mn = size_t(s.M) * s.N;
    const Vec x = randn(mn, 111, 2.0f), gamma = randn(s.N, 112), g_out = randn(mn, 113), dgamma0 = randn(s.N, 114);
    Vec y(mn), rstd(s.M), dx_ref(mn), dgamma_ref = dgamma0;
    k::rmsnorm_forward(x.data(), gamma.data(), y.data(), rstd.data(), s.M, s.N, kEps);
    k::rmsnorm_backward(g_out.data(), x.data(), gamma.data(), rstd.data(), dx_ref.data(), dgamma_ref.data(), s.M, s.N);
    auto ddy = to_device(g_out);
    auto dxin = to_device(x);
    auto dgam = to_device(gamma);
    auto drstd = to_device(rstd);
    const size_t scratch_n = kc::rmsnorm_backward_scratch_floats(s.M, s.N);
    CHECK(scratch_n <= size_t(kc::kLayerNormMaxChunks) * s.N);
    auto scratch = poisoned<float>(scratch_n);
    std::vector<Vec> dgammas;
    for (int run = 0; run < 2; ++run) {
      auto ddx = poisoned<float>(mn);
      auto ddgamma = to_device(dgamma0);
      SAL_CHECK_OK(kc::rmsnorm_backward(ctx(), ddy.get(), dxin.get(), dgam.get(), drstd.get(), ddx.get(),
                                        ddgamma.get(), s.M, s.N, scratch.get()));
      if (s.N == 1) {  // the exact dx is 0: both sides hold rounding noise only
        CHECK(max_abs(to_host(ddx)) <= 1e-4);
        CHECK(max_abs(dx_ref) <= 1e-4);
      } else {
        check_close(to_host(ddx), dx_ref, "rmsnorm dx");
      }
      dgammas.push_back(to_host(ddgamma));
      check_close(dgammas.back(), dgamma_ref, "rmsnorm dgamma");
    }
    CHECK(same_bits(dgammas[0], dgammas[1]));
    // frozen: the input gradient alone, no scratch
    auto ddx = poisoned<float>(mn);
    SAL_CHECK_OK(kc::rmsnorm_backward(ctx(), ddy.get(), dxin.get(), dgam.get(), drstd.get(), ddx.get(), nullptr, s.M,
                                      s.N, nullptr));
    if (s.N > 1) check_close(to_host(ddx), dx_ref, "rmsnorm dx (frozen)");
  }
}

// Rows of ld floats whose columns [col0, col0 + heads * hd) are rotated; the rest must be left as
// they were (the CPU leaves them too, so the whole rows are compared).
struct RopeShape {
  int B, T, ld, col0, heads, hd;
  float theta;
};
const RopeShape kRopeShapes[] = {
    {1, 1, 8, 0, 1, 8, 10000.0f},        // one token: position 0, no rotation
    {2, 16, 96, 0, 4, 16, 10000.0f},     // the queries of a fused row of 96
    {2, 16, 96, 64, 1, 16, 10000.0f},    // its one key head
    {3, 37, 130, 2, 3, 42, 500000.0f},   // odd T, an offset, Llama 3's theta
    {1, 2048, 64, 0, 2, 32, 1000000.0f}, // far positions (the angles in double)
};

TEST_CASE("cuda rope forward and backward match the CPU and invert each other") {
  for (RopeShape s : kRopeShapes) {
    CAPTURE(s.T);
    CAPTURE(s.hd);
    const int rows = s.B * s.T;
    const Vec x = randn(size_t(rows) * s.ld, 121);
    Vec fwd_ref = x, bwd_ref = x;
    k::rope_forward(fwd_ref.data(), rows, s.T, s.ld, s.col0, s.heads, s.hd, s.theta);
    k::rope_backward(bwd_ref.data(), rows, s.T, s.ld, s.col0, s.heads, s.hd, s.theta);
    auto dx = to_device(x);
    SAL_CHECK_OK(kc::rope_forward(ctx(), dx.get(), rows, s.T, s.ld, s.col0, s.heads, s.hd, s.theta));
    const Vec fwd = to_host(dx);
    check_close(fwd, fwd_ref, "rope forward");
    SAL_CHECK_OK(kc::rope_backward(ctx(), dx.get(), rows, s.T, s.ld, s.col0, s.heads, s.hd, s.theta));
    check_close(to_host(dx), x, "rope backward of forward");
    auto db = to_device(x);
    SAL_CHECK_OK(kc::rope_backward(ctx(), db.get(), rows, s.T, s.ld, s.col0, s.heads, s.hd, s.theta));
    check_close(to_host(db), bwd_ref, "rope backward");
    // the columns outside the heads are untouched, bit for bit
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < s.ld; ++c)
        if (c < s.col0 || c >= s.col0 + s.heads * s.hd) REQUIRE(fwd[size_t(r) * s.ld + c] == x[size_t(r) * s.ld + c]);
  }
}

TEST_CASE("cuda swiglu forward and backward match the CPU") {
  const RowShape shapes[] = {{1, 1}, {3, 7}, {64, 96}, {257, 1408}};
  for (RowShape s : shapes) {
    CAPTURE(s.M);
    CAPTURE(s.N);
    const int F = s.N;
    const Vec h = randn(size_t(s.M) * 2 * F, 131, 3.0f), da = randn(size_t(s.M) * F, 132);
    Vec a_ref(size_t(s.M) * F), dh_ref(size_t(s.M) * 2 * F);
    k::swiglu_forward(h.data(), a_ref.data(), s.M, F);
    k::swiglu_backward(h.data(), da.data(), dh_ref.data(), s.M, F);
    auto dh_in = to_device(h);
    auto dda = to_device(da);
    auto da_out = poisoned<float>(a_ref.size());
    auto ddh = poisoned<float>(dh_ref.size());
    SAL_CHECK_OK(kc::swiglu_forward(ctx(), dh_in.get(), da_out.get(), s.M, F));
    SAL_CHECK_OK(kc::swiglu_backward(ctx(), dh_in.get(), dda.get(), ddh.get(), s.M, F));
    check_close(to_host(da_out), a_ref, "swiglu a");
    check_close(to_host(ddh), dh_ref, "swiglu dh");
  }
}

struct HeadShape {
  int N, D, KV, hd;
};

TEST_CASE("cuda key/value heads expand and collapse as the CPU, bit for bit") {
  const HeadShape shapes[] = {{1, 8, 8, 8}, {5, 64, 16, 16}, {33, 96, 32, 16}, {130, 128, 64, 32}, {7, 48, 48, 8}};
  for (HeadShape s : shapes) {
    CAPTURE(s.D);
    CAPTURE(s.KV);
    const int in = s.D + 2 * s.KV;
    const Vec qkv = randn(size_t(s.N) * in, 141), dfull = randn(size_t(s.N) * 3 * s.D, 142);
    Vec full_ref(size_t(s.N) * 3 * s.D), dqkv_ref(size_t(s.N) * in);
    k::expand_kv_heads(qkv.data(), full_ref.data(), s.N, s.D, s.KV, s.hd);
    k::collapse_kv_heads(dfull.data(), dqkv_ref.data(), s.N, s.D, s.KV, s.hd);
    auto dqkv_in = to_device(qkv);
    auto ddfull = to_device(dfull);
    auto dfull_out = poisoned<float>(full_ref.size());
    auto dqkv_out = poisoned<float>(dqkv_ref.size());
    SAL_CHECK_OK(kc::expand_kv_heads(ctx(), dqkv_in.get(), dfull_out.get(), s.N, s.D, s.KV, s.hd));
    SAL_CHECK_OK(kc::collapse_kv_heads(ctx(), ddfull.get(), dqkv_out.get(), s.N, s.D, s.KV, s.hd));
    CHECK(same_bits(to_host(dfull_out), full_ref));
    CHECK(same_bits(to_host(dqkv_out), dqkv_ref));
  }
}

// ---------------------------------------------------------------------------------------------
// The SwiGLU experts

std::vector<kc::Bf16> bf16_of(const Vec& v) {
  std::vector<kc::Bf16> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = __float2bfloat16_rn(v[i]);
  return r;
}

Vec minus(const Vec& a, const Vec& b) {
  Vec r(a.size());
  for (size_t i = 0; i < a.size(); ++i) r[i] = a[i] - b[i];
  return r;
}

void check_bf16(const Vec& got, const Vec& ref, const std::string& what) {
  CAPTURE(what);
  CHECK(rel_error(got, ref) < kBf16Tol);
  CHECK(max_scaled(got, ref) < 2 * kBf16Tol);
}

struct HostSwiglu {
  Vec w13, w2, g13, g2;  // weights (bf16-exact) and their gradients (accumulated into)
};

// The CPU expert (model/expert.cpp's swiglu_mlp_forward / _backward) with the GPU's bf16 roundings
// of a, dout and dh: one expert on m rows.
void ref_swiglu_expert(int d, int F, int m, HostSwiglu& e, const float* x, const float* dout, float* out, float* h,
                       float* dx) {
  Vec a(size_t(m) * F), da(size_t(m) * F), dh(size_t(m) * 2 * F);
  k::gemm(false, false, m, 2 * F, d, 1.0f, x, e.w13.data(), 0.0f, h);
  k::swiglu_forward(h, a.data(), m, F);
  a = round_bf16(a);
  k::gemm(false, false, m, d, F, 1.0f, a.data(), e.w2.data(), 0.0f, out);
  const Vec dout_r = round_bf16(Vec(dout, dout + size_t(m) * d));
  k::gemm(false, true, m, F, d, 1.0f, dout_r.data(), e.w2.data(), 0.0f, da.data());
  k::swiglu_backward(h, da.data(), dh.data(), m, F);
  dh = round_bf16(dh);
  k::gemm(false, true, m, d, 2 * F, 1.0f, dh.data(), e.w13.data(), 0.0f, dx);
  k::gemm(true, false, d, 2 * F, m, 1.0f, x, dh.data(), 1.0f, e.g13.data());
  k::gemm(true, false, F, d, m, 1.0f, a.data(), dout_r.data(), 1.0f, e.g2.data());
}

// G experts with the given rows, forward and backward, against the CPU expert by expert; an empty
// expert's gradients and a frozen one's (null) must stay as they were, bit for bit.
void check_swiglu_experts(int d, int F, const std::vector<int>& rows, int frozen, uint32_t seed) {
  const int G = int(rows.size());
  int R = 0;
  for (int m : rows) R += m;
  CAPTURE(d);
  CAPTURE(F);
  CAPTURE(R);
  std::vector<HostSwiglu> host(rows.size());
  for (auto& e : host) {
    e.w13 = round_bf16(randn(size_t(d) * 2 * F, seed++, 1.0f / std::sqrt(float(d))));
    e.w2 = round_bf16(randn(size_t(F) * d, seed++, 1.0f / std::sqrt(float(F))));
    e.g13 = randn(size_t(d) * 2 * F, seed++, 0.1f);
    e.g2 = randn(size_t(F) * d, seed++, 0.1f);
  }
  const std::vector<HostSwiglu> initial = host;
  const Vec x = round_bf16(randn(size_t(R) * d, seed++)), dout = randn(size_t(R) * d, seed++);
  std::vector<kc::Buffer<kc::Bf16>> w13(rows.size()), w2(rows.size());
  std::vector<kc::Buffer<float>> g13(rows.size()), g2(rows.size());
  std::vector<kc::SwigluExpertParams> params(rows.size());
  std::vector<kc::SwigluExpertGrads> grads(rows.size());
  for (int g = 0; g < G; ++g) {
    w13[g] = to_device(bf16_of(host[g].w13));
    w2[g] = to_device(bf16_of(host[g].w2));
    g13[g] = to_device(host[g].g13);
    g2[g] = to_device(host[g].g2);
    params[g] = {w13[g].get(), w2[g].get()};
    if (g != frozen) grads[g] = {g13[g].get(), g2[g].get()};
  }
  Vec out_ref(size_t(R) * d), h_ref(size_t(R) * 2 * F), dx_ref(size_t(R) * d);
  for (int g = 0, r = 0; g < G; r += rows[g], ++g)
    ref_swiglu_expert(d, F, rows[g], host[g], x.data() + size_t(r) * d, dout.data() + size_t(r) * d,
                      out_ref.data() + size_t(r) * d, h_ref.data() + size_t(r) * 2 * F, dx_ref.data() + size_t(r) * d);

  auto dx_in = to_device(x), ddout = to_device(dout);
  auto out = poisoned<float>(size_t(R) * d), dx = poisoned<float>(size_t(R) * d);
  auto sx = poisoned<kc::Bf16>(size_t(R) * d);
  auto sh = poisoned<float>(size_t(R) * 2 * F);
  const size_t bytes = kc::swiglu_experts_scratch_bytes(R, d, F);
  auto scratch = poisoned<unsigned char>(bytes);
  const kc::SwigluSaved saved{sx.get(), sh.get()};
  SAL_CHECK_OK(kc::swiglu_experts_forward(ctx(), G, rows.data(), d, F, params.data(), dx_in.get(), out.get(), saved,
                                          scratch.get(), bytes));
  SAL_CHECK_OK(kc::swiglu_experts_backward(ctx(), G, rows.data(), d, F, params.data(), saved, ddout.get(), dx.get(),
                                           grads.data(), scratch.get(), bytes));
  if (R > 0) {
    check_bf16(to_host(out), out_ref, "out");
    check_close(to_host(sh), h_ref, "h", 1e-5, 1e-2);  // bf16-exact operands: reassociation only
    check_bf16(to_host(dx), dx_ref, "dx");
  }
  for (int g = 0; g < G; ++g) {
    CAPTURE(g);
    if (rows[g] == 0 || g == frozen) {
      CHECK(same_bits(to_host(g13[g]), initial[g].g13));
      CHECK(same_bits(to_host(g2[g]), initial[g].g2));
      continue;
    }
    check_bf16(minus(to_host(g13[g]), initial[g].g13), minus(host[g].g13, initial[g].g13), "dW13");
    check_bf16(minus(to_host(g2[g]), initial[g].g2), minus(host[g].g2, initial[g].g2), "dW2");
  }
}

TEST_CASE("cuda swiglu experts match the CPU expert, skip empty experts and leave a frozen one's gradients") {
  check_swiglu_experts(16, 24, {5, 0, 17, 1}, -1, 9000);
  check_swiglu_experts(64, 32, {33, 0, 0, 70, 2}, 3, 9100);  // fine-grained: F below d
  check_swiglu_experts(12, 20, {3, 9}, 0, 9200);            // widths not multiples of 8
  check_swiglu_experts(8, 8, {0, 0}, -1, 9300);             // no rows: nothing runs
}

TEST_CASE("cuda swiglu experts reject bad arguments") {
  const int d = 8, F = 8, R = 4;
  std::vector<int> rows = {R}, negative = {-1};
  auto w13 = poisoned<kc::Bf16>(size_t(d) * 2 * F), w2 = poisoned<kc::Bf16>(size_t(F) * d);
  auto x = poisoned<float>(size_t(R) * d), out = poisoned<float>(size_t(R) * d);
  auto sx = poisoned<kc::Bf16>(size_t(R) * d);
  auto sh = poisoned<float>(size_t(R) * 2 * F);
  const size_t bytes = kc::swiglu_experts_scratch_bytes(R, d, F);
  auto scratch = poisoned<unsigned char>(bytes);
  const kc::SwigluExpertParams p{w13.get(), w2.get()}, none{};
  const kc::SwigluSaved saved{sx.get(), sh.get()};
  kc::SwigluExpertGrads g{};
  CHECK_FALSE(kc::swiglu_experts_forward(ctx(), 1, rows.data(), d, F, &none, x.get(), out.get(), saved, scratch.get(),
                                         bytes).ok());  // rows but no weights
  CHECK_FALSE(kc::swiglu_experts_forward(ctx(), 1, negative.data(), d, F, &p, x.get(), out.get(), saved, scratch.get(),
                                         bytes).ok());
  CHECK_FALSE(kc::swiglu_experts_forward(ctx(), 1, rows.data(), d, F, &p, x.get(), out.get(), saved, scratch.get(),
                                         bytes - 1).ok());  // scratch short
  CHECK_FALSE(kc::swiglu_experts_backward(ctx(), 1, rows.data(), d, F, &p, saved, out.get(), out.get(), &g,
                                          scratch.get(), bytes).ok());  // dx aliases dout
  CHECK_FALSE(kc::swiglu_experts_forward(ctx(), 1, rows.data(), 0, F, &p, x.get(), out.get(), saved, scratch.get(),
                                         bytes).ok());
}

// ---------------------------------------------------------------------------------------------
// The router

struct RouterShape {
  int N, E, K;
};
// Switch-like (8 of 2), fine-grained (64 of 8, OLMoE's), DeepSeek-like (256 of 8), one token.
const RouterShape kRouterShapes[] = {{1, 4, 1}, {300, 8, 2}, {129, 64, 8}, {40, 256, 8}};

TEST_CASE("cuda router forward pieces match the CPU") {
  for (RouterShape s : kRouterShapes) {
    CAPTURE(s.E);
    CAPTURE(s.K);
    const size_t ne = size_t(s.N) * s.E, nk = size_t(s.N) * s.K;
    const Vec z = randn(ne, 151, 2.0f), bias = randn(s.E, 152, 0.5f);
    Vec sig_ref(ne), q_ref(ne), lse_ref(s.N);
    k::sigmoid_forward(z.data(), sig_ref.data(), ne);
    k::normalise_rows(sig_ref.data(), q_ref.data(), s.N, s.E);
    k::row_logsumexp(z.data(), lse_ref.data(), s.N, s.E);
    // the biased top k: the top k of scores + bias, their scores without it
    Vec biased(ne), ignored(nk), chosen_ref(nk), w_ref(nk), wn_ref(nk);
    std::vector<int32_t> idx_ref(nk);
    for (size_t i = 0; i < ne; ++i) biased[i] = sig_ref[i] + bias[i % size_t(s.E)];
    k::topk(biased.data(), s.N, s.E, s.K, idx_ref.data(), ignored.data());
    for (size_t i = 0; i < nk; ++i) chosen_ref[i] = sig_ref[(i / size_t(s.K)) * s.E + size_t(idx_ref[i])];
    k::topk_weights(chosen_ref.data(), w_ref.data(), s.N, s.K, false);
    k::topk_weights(chosen_ref.data(), wn_ref.data(), s.N, s.K, true);

    auto dz = to_device(z);
    auto dbias = to_device(bias);
    auto dsig = poisoned<float>(ne);
    auto dq = poisoned<float>(ne);
    auto dlse = poisoned<float>(s.N);
    SAL_CHECK_OK(kc::sigmoid_forward(ctx(), dz.get(), dsig.get(), ne));
    SAL_CHECK_OK(kc::normalise_rows(ctx(), dsig.get(), dq.get(), s.N, s.E));
    SAL_CHECK_OK(kc::row_logsumexp(ctx(), dz.get(), dlse.get(), s.N, s.E));
    check_close(to_host(dsig), sig_ref, "sigmoid");
    check_close(to_host(dq), q_ref, "normalised scores");
    check_close(to_host(dlse), lse_ref, "logsumexp");

    auto dsig_ref = to_device(sig_ref);  // the CPU's scores, so the choice is exactly the CPU's
    auto didx = poisoned<int32_t>(nk);
    auto dchosen = poisoned<float>(nk);
    auto scratch = poisoned<float>(ne);
    SAL_CHECK_OK(kc::biased_topk(ctx(), dsig_ref.get(), dbias.get(), s.N, s.E, s.K, didx.get(), dchosen.get(),
                                 scratch.get()));
    CHECK(to_host(didx) == idx_ref);
    CHECK(same_bits(to_host(dchosen), chosen_ref));
    auto dw = poisoned<float>(nk);
    SAL_CHECK_OK(kc::topk_weights(ctx(), dchosen.get(), dw.get(), s.N, s.K, false));
    CHECK(same_bits(to_host(dw), w_ref));
    SAL_CHECK_OK(kc::topk_weights(ctx(), dchosen.get(), dw.get(), s.N, s.K, true));
    check_close(to_host(dw), wn_ref, "renormalised weights");
    // without a bias: the plain top k
    Vec plain_val(nk);
    std::vector<int32_t> plain_idx(nk);
    k::topk(sig_ref.data(), s.N, s.E, s.K, plain_idx.data(), plain_val.data());
    SAL_CHECK_OK(kc::biased_topk(ctx(), dsig_ref.get(), nullptr, s.N, s.E, s.K, didx.get(), dchosen.get(), nullptr));
    CHECK(to_host(didx) == plain_idx);
    CHECK(same_bits(to_host(dchosen), plain_val));
  }
}

TEST_CASE("cuda router gradients match the CPU: sigmoid and softmax scores, renormalised or not, with a z-loss") {
  for (RouterShape s : kRouterShapes)
    for (int variant = 0; variant < 4; ++variant) {
      const bool sigmoid = variant & 1, norm = variant & 2;
      CAPTURE(s.E);
      CAPTURE(sigmoid);
      CAPTURE(norm);
      const size_t ne = size_t(s.N) * s.E, nk = size_t(s.N) * s.K;
      const Vec z = randn(ne, 161, 2.0f), dwv = randn(nk, 162);
      Vec scores(ne), lse(s.N), chosen(nk), w(nk);
      std::vector<int32_t> idx(nk);
      if (sigmoid)
        k::sigmoid_forward(z.data(), scores.data(), ne);
      else
        k::softmax_forward(z.data(), scores.data(), s.N, s.E);
      k::row_logsumexp(z.data(), lse.data(), s.N, s.E);
      k::topk(scores.data(), s.N, s.E, s.K, idx.data(), chosen.data());
      k::topk_weights(chosen.data(), w.data(), s.N, s.K, norm);
      std::vector<double> f(static_cast<size_t>(s.E));
      std::mt19937 rng(163);
      for (auto& v : f) v = std::uniform_real_distribution<double>(0.0, 2.0 / s.E)(rng);
      k::RouterGrad g;
      g.scores = scores.data();
      g.chosen = chosen.data();
      g.w = w.data();
      g.idx = idx.data();
      g.dw = dwv.data();
      g.f = f.data();
      g.aux_scale = 0.01 * s.E / 1000.0;
      g.sigmoid = sigmoid;
      g.norm = norm;
      const double z_scale = 2.0 * 1e-3 / 1000.0;
      Vec ds_ref(ne), dz_ref(ne);
      k::router_dscores(g, s.N, s.E, s.K, ds_ref.data());
      k::router_dlogits(z.data(), scores.data(), ds_ref.data(), lse.data(), z_scale, sigmoid, s.N, s.E, dz_ref.data());

      auto d_scores = to_device(scores);
      auto d_chosen = to_device(chosen);
      auto d_w = to_device(w);
      auto d_idx = to_device(idx);
      auto d_dw = to_device(dwv);
      auto d_f = to_device(f);
      auto d_z = to_device(z);
      auto d_lse = to_device(lse);
      kc::RouterGrad dg;
      dg.scores = d_scores.get();
      dg.chosen = d_chosen.get();
      dg.w = d_w.get();
      dg.idx = d_idx.get();
      dg.dw = d_dw.get();
      dg.f = d_f.get();
      dg.aux_scale = g.aux_scale;
      dg.sigmoid = sigmoid;
      dg.norm = norm;
      auto d_ds = poisoned<float>(ne);
      auto d_dz = poisoned<float>(ne);
      SAL_CHECK_OK(kc::router_dscores(ctx(), dg, s.N, s.E, s.K, d_ds.get()));
      check_close(to_host(d_ds), ds_ref, "router dscores");
      SAL_CHECK_OK(kc::router_dlogits(ctx(), d_z.get(), d_scores.get(), d_ds.get(), d_lse.get(), z_scale, sigmoid,
                                      s.N, s.E, d_dz.get()));
      check_close(to_host(d_dz), dz_ref, "router dlogits");
    }
}

TEST_CASE("cuda shared experts' gate matches the CPU") {
  const RowShape shapes[] = {{1, 1}, {37, 64}, {300, 96}};
  for (RowShape s : shapes) {
    CAPTURE(s.M);
    const size_t nd = size_t(s.M) * s.N;
    const Vec z = randn(s.M, 171, 2.0f), out = randn(nd, 172), next0 = randn(nd, 173), dy = randn(nd, 174);
    Vec next_ref = next0, g_ref(s.M), dout_ref(nd), dz_ref(s.M);
    k::shared_gate_forward(z.data(), out.data(), next_ref.data(), g_ref.data(), s.M, s.N);
    k::shared_gate_backward(g_ref.data(), out.data(), dy.data(), dout_ref.data(), dz_ref.data(), s.M, s.N);
    auto dz_in = to_device(z), dout_in = to_device(out), dnext = to_device(next0), ddy = to_device(dy);
    auto dg = poisoned<float>(s.M), ddout = poisoned<float>(nd), ddz = poisoned<float>(s.M);
    SAL_CHECK_OK(kc::shared_gate_forward(ctx(), dz_in.get(), dout_in.get(), dnext.get(), dg.get(), s.M, s.N));
    check_close(to_host(dnext), next_ref, "next");
    check_close(to_host(dg), g_ref, "g");
    auto dg_ref = to_device(g_ref);
    SAL_CHECK_OK(
        kc::shared_gate_backward(ctx(), dg_ref.get(), dout_in.get(), ddy.get(), ddout.get(), ddz.get(), s.M, s.N));
    check_close(to_host(ddout), dout_ref, "dout");
    check_close(to_host(ddz), dz_ref, "dz");
  }
}

TEST_CASE("cuda embedding without a position table gives the token rows (moe-llama)") {
  const int B = 3, T = 17, C = 40, V = 50;
  std::vector<int32_t> ids(size_t(B) * T);
  std::mt19937 rng(181);
  for (auto& i : ids) i = int32_t(rng() % V);
  ids[5] = V + 3;  // outside: counted, its row zero
  const Vec tok = randn(size_t(V) * C, 182);
  Vec want(ids.size() * C, 0.0f);
  for (size_t r = 0; r < ids.size(); ++r)
    if (ids[r] < V) std::copy_n(&tok[size_t(ids[r]) * C], C, &want[r * C]);
  auto dids = to_device(ids);
  auto dtok = to_device(tok);
  auto out = poisoned<float>(want.size());
  auto bad = poisoned<int32_t>(1);
  SAL_CHECK_OK(kc::embedding_forward(ctx(), dids.get(), dtok.get(), nullptr, out.get(), B, T, C, V, bad.get()));
  CHECK(same_bits(to_host(out), want));
  CHECK(to_host(bad) == std::vector<int32_t>{1});
}

TEST_CASE("cuda moe-llama kernels reject bad arguments and accept empty sizes") {
  auto buf = poisoned<float>(64);
  auto ibuf = poisoned<int32_t>(64);
  float* p = buf.get();
  CHECK_FALSE(kc::rmsnorm_forward(ctx(), p, p, p, p, -1, 4, kEps).ok());
  CHECK_FALSE(kc::rmsnorm_forward(ctx(), nullptr, p, p, p, 2, 4, kEps).ok());
  CHECK_FALSE(kc::rmsnorm_backward(ctx(), p, p, p, p, p, nullptr, 2, 4, nullptr).ok());  // dx aliases dy
  CHECK_FALSE(kc::rmsnorm_backward(ctx(), p, p + 8, p, p, p + 16, p + 24, 2, 4, nullptr).ok());  // no scratch
  CHECK(kc::rmsnorm_forward(ctx(), nullptr, nullptr, nullptr, nullptr, 0, 4, kEps).ok());
  CHECK_FALSE(kc::rope_forward(ctx(), p, 2, 2, 8, 4, 1, 8, 1e4f).ok());  // past the row
  CHECK_FALSE(kc::rope_forward(ctx(), p, 2, 0, 8, 0, 1, 8, 1e4f).ok());  // T = 0
  CHECK(kc::rope_forward(ctx(), nullptr, 0, 2, 8, 0, 1, 8, 1e4f).ok());
  CHECK_FALSE(kc::swiglu_forward(ctx(), p, p, -1, 4).ok());
  CHECK_FALSE(kc::swiglu_backward(ctx(), p, nullptr, p, 2, 4).ok());
  CHECK_FALSE(kc::expand_kv_heads(ctx(), p, p + 32, 1, 8, 6, 4).ok());  // KV does not divide D
  CHECK_FALSE(kc::collapse_kv_heads(ctx(), p, nullptr, 1, 8, 8, 8).ok());
  CHECK_FALSE(kc::biased_topk(ctx(), p, p, 2, 4, 5, ibuf.get(), p + 8, p + 16).ok());  // k > E
  CHECK_FALSE(kc::biased_topk(ctx(), p, p, 2, 4, 2, ibuf.get(), p + 8, nullptr).ok());  // no scratch
  CHECK_FALSE(kc::topk_weights(ctx(), p, p + 8, 2, 0, true).ok());
  CHECK_FALSE(kc::row_logsumexp(ctx(), p, p, 2, 0).ok());
  kc::RouterGrad none;
  CHECK_FALSE(kc::router_dscores(ctx(), none, 2, 4, 2, p).ok());
  CHECK_FALSE(kc::router_dlogits(ctx(), nullptr, p, p, nullptr, 1.0, false, 2, 4, p + 8).ok());  // z-loss, no z
  CHECK(kc::router_dscores(ctx(), none, 0, 4, 2, p).ok());
  CHECK_FALSE(kc::shared_gate_forward(ctx(), p, p, p, nullptr, 2, 4).ok());
  CHECK_FALSE(kc::shared_gate_backward(ctx(), p, p, p, p, p, 2, 0).ok());
}

}  // namespace
