// test_elementwise.cpp — the elementwise, normalisation, gate, embedding, loss and optimizer kernels
// of kernels/cuda against their kernels/cpu references: random inputs over several shapes (one
// row, odd sizes, sizes that are not multiples of a warp or a block, the 50257-word vocabulary),
// every output poisoned with NaN first so an element a kernel forgot fails, accumulating outputs
// started from random values so a kernel that overwrites fails. The reductions are also run twice
// and compared bit for bit (they promise the same bits on every run), and bad arguments must come
// back as errors, not launches.
//
// Tolerances: fp32 results within kFp32Tol in relative 2-norm (reassociation and expf against the
// CPU's polynomial exp are a few ulps), and no single element off by more than kWorstTol relative to
// |ref| + 1e-3 (a forgotten or misplaced element is off by O(1)). Where the GPU does exactly the
// CPU's operations in the CPU's order (bf16 rounding, embedding, the loss gradient, scale, top-k)
// the comparison is exact.
#include <doctest/doctest.h>

#include <cuda_bf16.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/loss.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/optim.h"
#include "kernels/cpu/softmax.h"
#include "kernels/cuda/activation.h"
#include "kernels/cuda/convert.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/loss.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/optim.h"
#include "kernels/cuda/softmax.h"

namespace {

namespace k = sal::kernels::cpu;
namespace kc = sal::kernels::cuda;
using namespace sal::test::gpu;
using Vec = std::vector<float>;


// LayerNorm's dx compared with the CPU's. With N = 1 the exact dx is 0 and both sides hold only
// rounding noise (the CPU's fused multiply-add leaves ~1e-6 there): then both must be tiny.
void check_layernorm_dx(const Vec& got, const Vec& ref, int N, const std::string& what) {
  if (N == 1) {
    CHECK_MESSAGE(max_abs(got) <= 1e-4, what << ": N = 1 must give dx = 0 up to rounding, got " << max_abs(got));
    CHECK(max_abs(ref) <= 1e-4);
    return;
  }
  check_close(got, ref, what);
}

// Uniform ints in [lo, hi].
std::vector<int32_t> rand_ints(size_t n, uint32_t seed, int lo, int hi) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<int32_t> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// The one element of a device buffer (waits for the stream).
template <class T>
T read_scalar(const kc::Buffer<T>& b) {
  std::vector<T> h = to_host(b);
  REQUIRE(h.size() == 1);
  return h[0];
}

// ---------------------------------------------------------------------------------------------
// convert

uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Reference fp32 -> bf16, round to nearest even (NaN: any NaN bits).
uint16_t bf16_rne(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

bool bf16_is_nan(uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x7fu) != 0; }

std::vector<uint16_t> bf16_bits(const std::vector<kc::Bf16>& v) {
  std::vector<uint16_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = __nv_bfloat16_raw(v[i]).x;
  return b;
}

TEST_CASE("cuda to_bf16 rounds to nearest even like the bit-level reference") {
  // Edge values first: zeros, ties to even (down and up), overflow to inf, infinities, NaN,
  // denormals (a tie among them too) and the largest denormal rounding up to the smallest normal.
  Vec special = {0.0f, -0.0f, 1.0f, bits_float(0x3f808000u), bits_float(0x3f818000u), bits_float(0x3f808001u),
                 FLT_MAX, -FLT_MAX, INFINITY, -INFINITY, NAN, bits_float(1u), bits_float(0x00408000u),
                 bits_float(0x00418000u), bits_float(0x007fffffu), -3.14159f, 65504.0f, 1e-40f};
  for (size_t n : {size_t(1), special.size(), size_t(257), size_t(100003)}) {
    CAPTURE(n);
    Vec x = randn(n, uint32_t(n), 10.0f);
    for (size_t i = 0; i < n && i < special.size(); ++i) x[i] = special[i];
    auto dx = to_device(x);
    auto dy = poisoned<kc::Bf16>(n);
    SAL_CHECK_OK(kc::to_bf16(ctx(), dx.get(), dy.get(), n));
    const std::vector<uint16_t> got = bf16_bits(to_host(dy));
    size_t wrong = 0;
    for (size_t i = 0; i < n; ++i) {
      const uint16_t ref = bf16_rne(x[i]);
      const bool ok = bf16_is_nan(ref) ? bf16_is_nan(got[i]) : got[i] == ref;
      if (!ok && wrong++ < 5) MESSAGE("x = " << x[i] << " (0x" << std::hex << float_bits(x[i]) << "): got 0x" << got[i]
                                              << ", want 0x" << ref << std::dec);
    }
    CHECK(wrong == 0);
  }
}

TEST_CASE("cuda to_float widens bf16 exactly") {
  for (size_t n : {size_t(1), size_t(33), size_t(65536 + 7)}) {
    CAPTURE(n);
    // Every bit pattern in turn (n > 65536 covers them all, NaNs included).
    std::vector<uint16_t> bits(n);
    for (size_t i = 0; i < n; ++i) bits[i] = uint16_t(i * 40503u);
    std::vector<kc::Bf16> x(n);
    for (size_t i = 0; i < n; ++i) {
      __nv_bfloat16_raw raw;
      raw.x = bits[i];
      x[i] = kc::Bf16(raw);
    }
    auto dx = to_device(x);
    auto dy = poisoned<float>(n);
    SAL_CHECK_OK(kc::to_float(ctx(), dx.get(), dy.get(), n));
    const Vec got = to_host(dy);
    size_t wrong = 0;
    for (size_t i = 0; i < n; ++i) {
      const float ref = bits_float(uint32_t(bits[i]) << 16);
      const bool ok = std::isnan(ref) ? std::isnan(got[i]) : float_bits(got[i]) == float_bits(ref);
      wrong += !ok;
    }
    CHECK(wrong == 0);
  }
  // A round trip through both is the reference rounding.
  const size_t n = 1000;
  Vec x = randn(n, 7);
  auto dx = to_device(x);
  auto db = poisoned<kc::Bf16>(n);
  auto dy = poisoned<float>(n);
  SAL_CHECK_OK(kc::to_bf16(ctx(), dx.get(), db.get(), n));
  SAL_CHECK_OK(kc::to_float(ctx(), db.get(), dy.get(), n));
  const Vec got = to_host(dy);
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) wrong += float_bits(got[i]) != uint32_t(bf16_rne(x[i])) << 16;
  CHECK(wrong == 0);
}

// ---------------------------------------------------------------------------------------------
// GELU

TEST_CASE("cuda gelu forward and backward match the CPU") {
  for (size_t n : {size_t(1), size_t(31), size_t(1000), size_t(65537)}) {
    CAPTURE(n);
    Vec x = randn(n, uint32_t(n) + 1, 2.0f);
    // Far tails, where the exponent clamp matters, and zero.
    const float tails[] = {-100.0f, -20.0f, -9.0f, 0.0f, 9.0f, 20.0f, 100.0f};
    for (size_t i = 0; i < n && i < 7; ++i) x[n - 1 - i] = tails[i];
    const Vec dy = randn(n, uint32_t(n) + 2);
    Vec y_ref(n), dx_ref(n);
    k::gelu_forward(x.data(), y_ref.data(), n);
    k::gelu_backward(x.data(), dy.data(), dx_ref.data(), n);

    auto dx_in = to_device(x);
    auto ddy = to_device(dy);
    auto dy_out = poisoned<float>(n);
    auto ddx = poisoned<float>(n);
    SAL_CHECK_OK(kc::gelu_forward(ctx(), dx_in.get(), dy_out.get(), n));
    SAL_CHECK_OK(kc::gelu_backward(ctx(), dx_in.get(), ddy.get(), ddx.get(), n));
    check_close(to_host(dy_out), y_ref, "gelu forward");
    check_close(to_host(ddx), dx_ref, "gelu backward");

    // In place: y over x, dx over dy.
    auto inplace = to_device(x);
    SAL_CHECK_OK(kc::gelu_forward(ctx(), inplace.get(), inplace.get(), n));
    check_close(to_host(inplace), y_ref, "gelu forward in place");
    SAL_CHECK_OK(kc::gelu_backward(ctx(), dx_in.get(), ddy.get(), ddy.get(), n));
    check_close(to_host(ddy), dx_ref, "gelu backward in place");
  }
}

// ---------------------------------------------------------------------------------------------
// LayerNorm

struct Shape {
  int M, N;
};

// M = 3000 cuts the column pass into many chunks (the last one short); N = 1, 33, 100 are not
// multiples of a warp; N = 1000 is more than one block's threads per row.
const Shape kNormShapes[] = {{1, 1}, {1, 7}, {3, 32}, {5, 100}, {17, 768}, {130, 33}, {3000, 40}, {4, 1000}};

TEST_CASE("cuda layernorm forward matches the CPU") {
  for (Shape s : kNormShapes) {
    CAPTURE(s.M);
    CAPTURE(s.N);
    const size_t mn = size_t(s.M) * s.N;
    Vec x = randn(mn, 11, 3.0f);
    for (auto& v : x) v += 0.5f;  // a nonzero mean
    const Vec gamma = randn(s.N, 12), beta = randn(s.N, 13);
    Vec y_ref(mn), mean_ref(s.M), rstd_ref(s.M);
    k::layernorm_forward(x.data(), gamma.data(), beta.data(), y_ref.data(), mean_ref.data(), rstd_ref.data(), s.M,
                         s.N);
    auto dx = to_device(x);
    auto dg = to_device(gamma);
    auto db = to_device(beta);
    auto dy = poisoned<float>(mn);
    auto dmean = poisoned<float>(s.M);
    auto drstd = poisoned<float>(s.M);
    SAL_CHECK_OK(kc::layernorm_forward(ctx(), dx.get(), dg.get(), db.get(), dy.get(), dmean.get(), drstd.get(), s.M,
                                       s.N));
    check_close(to_host(dy), y_ref, "layernorm y");
    check_close(to_host(dmean), mean_ref, "layernorm mean");
    check_close(to_host(drstd), rstd_ref, "layernorm rstd");
  }
}

TEST_CASE("cuda layernorm backward matches the CPU and its column sums are deterministic") {
  for (Shape s : kNormShapes) {
    CAPTURE(s.M);
    CAPTURE(s.N);
    const size_t mn = size_t(s.M) * s.N;
    const Vec x = randn(mn, 21, 2.0f), gamma = randn(s.N, 22), beta = randn(s.N, 23), g_out = randn(mn, 24);
    const Vec dgamma0 = randn(s.N, 25), dbeta0 = randn(s.N, 26);  // they accumulate
    Vec y(mn), mean(s.M), rstd(s.M);
    k::layernorm_forward(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(), s.M, s.N);
    Vec dx_ref(mn), dgamma_ref = dgamma0, dbeta_ref = dbeta0;
    k::layernorm_backward(g_out.data(), x.data(), gamma.data(), mean.data(), rstd.data(), dx_ref.data(),
                          dgamma_ref.data(), dbeta_ref.data(), s.M, s.N);

    auto ddy = to_device(g_out);
    auto dx_in = to_device(x);
    auto dgam = to_device(gamma);
    auto dmean = to_device(mean);
    auto drstd = to_device(rstd);
    const size_t scratch_n = kc::layernorm_backward_scratch_floats(s.M, s.N);
    CHECK(scratch_n <= size_t(2) * kc::kLayerNormMaxChunks * s.N);
    auto scratch = poisoned<float>(scratch_n);
    std::vector<Vec> dgammas, dbetas;
    for (int run = 0; run < 2; ++run) {
      auto ddx = poisoned<float>(mn);
      auto ddgamma = to_device(dgamma0);
      auto ddbeta = to_device(dbeta0);
      SAL_CHECK_OK(kc::layernorm_backward(ctx(), ddy.get(), dx_in.get(), dgam.get(), dmean.get(), drstd.get(),
                                          ddx.get(), ddgamma.get(), ddbeta.get(), s.M, s.N, scratch.get()));
      check_layernorm_dx(to_host(ddx), dx_ref, s.N, "layernorm dx");
      dgammas.push_back(to_host(ddgamma));
      dbetas.push_back(to_host(ddbeta));
      check_close(dgammas.back(), dgamma_ref, "layernorm dgamma");
      check_close(dbetas.back(), dbeta_ref, "layernorm dbeta");
    }
    CHECK(same_bits(dgammas[0], dgammas[1]));
    CHECK(same_bits(dbetas[0], dbetas[1]));

    // Frozen: no parameter gradients, no scratch; dx alone.
    auto ddx = poisoned<float>(mn);
    SAL_CHECK_OK(kc::layernorm_backward(ctx(), ddy.get(), dx_in.get(), dgam.get(), dmean.get(), drstd.get(),
                                        ddx.get(), nullptr, nullptr, s.M, s.N, nullptr));
    check_layernorm_dx(to_host(ddx), dx_ref, s.N, "layernorm dx (frozen)");
  }
}

TEST_CASE("cuda layernorm backward with only dbeta leaves the rest alone") {
  const int M = 50, N = 70;
  const size_t mn = size_t(M) * N;
  const Vec x = randn(mn, 31), gamma = randn(N, 32), beta = randn(N, 33), g_out = randn(mn, 34), dbeta0 = randn(N, 35);
  Vec y(mn), mean(M), rstd(M), dx_ref(mn), dgamma_ref(N, 0.0f), dbeta_ref = dbeta0;
  k::layernorm_forward(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(), M, N);
  k::layernorm_backward(g_out.data(), x.data(), gamma.data(), mean.data(), rstd.data(), dx_ref.data(),
                        dgamma_ref.data(), dbeta_ref.data(), M, N);
  auto ddy = to_device(g_out);
  auto dx_in = to_device(x);
  auto dgam = to_device(gamma);
  auto dmean = to_device(mean);
  auto drstd = to_device(rstd);
  auto ddx = poisoned<float>(mn);
  auto ddbeta = to_device(dbeta0);
  auto scratch = poisoned<float>(kc::layernorm_backward_scratch_floats(M, N));
  SAL_CHECK_OK(kc::layernorm_backward(ctx(), ddy.get(), dx_in.get(), dgam.get(), dmean.get(), drstd.get(), ddx.get(),
                                      nullptr, ddbeta.get(), M, N, scratch.get()));
  check_close(to_host(ddx), dx_ref, "layernorm dx");
  check_close(to_host(ddbeta), dbeta_ref, "layernorm dbeta");
}

// ---------------------------------------------------------------------------------------------
// softmax and top-k

const Shape kSoftmaxShapes[] = {{1, 1}, {1, 5}, {7, 8}, {33, 256}, {5, 1000}, {3, 4099}, {64, 33}};

TEST_CASE("cuda softmax forward and backward match the CPU") {
  for (Shape s : kSoftmaxShapes) {
    CAPTURE(s.M);
    CAPTURE(s.N);
    const size_t mn = size_t(s.M) * s.N;
    const Vec x = randn(mn, 41, 4.0f), g_out = randn(mn, 42);
    Vec y_ref(mn), dx_ref(mn);
    k::softmax_forward(x.data(), y_ref.data(), s.M, s.N);
    k::softmax_backward(y_ref.data(), g_out.data(), dx_ref.data(), s.M, s.N);

    auto dxin = to_device(x);
    auto dy = poisoned<float>(mn);
    SAL_CHECK_OK(kc::softmax_forward(ctx(), dxin.get(), dy.get(), s.M, s.N));
    check_close(to_host(dy), y_ref, "softmax y");

    auto dyref = to_device(y_ref);  // the backward on the CPU's y: the kernel alone is compared
    auto dg = to_device(g_out);
    auto ddx = poisoned<float>(mn);
    SAL_CHECK_OK(kc::softmax_backward(ctx(), dyref.get(), dg.get(), ddx.get(), s.M, s.N));
    check_close(to_host(ddx), dx_ref, "softmax dx");

    // In place: y over x, dx over dy.
    SAL_CHECK_OK(kc::softmax_forward(ctx(), dxin.get(), dxin.get(), s.M, s.N));
    check_close(to_host(dxin), y_ref, "softmax y in place");
    SAL_CHECK_OK(kc::softmax_backward(ctx(), dyref.get(), dg.get(), dg.get(), s.M, s.N));
    check_close(to_host(dg), dx_ref, "softmax dx in place");
  }
}

// Rows of a top-k input: kind 0 random, 1 few distinct values (ties), 2 NaNs among ties, 3 all
// NaN, 4 signed zeros, infinities and NaNs, 5 ascending (the best at the end of the row).
Vec topk_input(int M, int N, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> small(0, 3);
  std::uniform_int_distribution<int> pick(0, 4);
  Vec x(size_t(M) * N);
  for (int m = 0; m < M; ++m) {
    float* r = x.data() + size_t(m) * N;
    const int kind = m % 6;
    for (int i = 0; i < N; ++i) {
      switch (kind) {
        case 0: r[i] = normal(rng); break;
        case 1: r[i] = float(small(rng)); break;
        case 2: r[i] = pick(rng) == 0 ? NAN : float(small(rng)); break;
        case 3: r[i] = NAN; break;
        case 4: {
          const float v[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN};
          r[i] = v[pick(rng)];
          break;
        }
        default: r[i] = float(i) * 0.5f; break;
      }
    }
  }
  return x;
}

TEST_CASE("cuda topk matches the CPU with ties and NaNs") {
  struct Case {
    int M, N, k;
  };
  const Case cases[] = {{1, 1, 1},   {6, 8, 2},   {37, 256, 8}, {12, 300, 16},
                        {6, 16, 16}, {13, 33, 1}, {9, 64, 7},   {6, 5, 3}};
  for (Case c : cases) {
    CAPTURE(c.M);
    CAPTURE(c.N);
    CAPTURE(c.k);
    const Vec x = topk_input(c.M, c.N, uint32_t(c.M * 1000 + c.N));
    const size_t mk = size_t(c.M) * c.k;
    std::vector<int32_t> idx_ref(mk);
    Vec val_ref(mk);
    k::topk(x.data(), c.M, c.N, c.k, idx_ref.data(), val_ref.data());
    auto dx = to_device(x);
    auto didx = poisoned<int32_t>(mk);
    auto dval = poisoned<float>(mk);
    SAL_CHECK_OK(kc::topk(ctx(), dx.get(), c.M, c.N, c.k, didx.get(), dval.get()));
    const std::vector<int32_t> idx = to_host(didx);
    const Vec val = to_host(dval);
    size_t wrong = 0;
    for (size_t i = 0; i < mk; ++i) {
      const bool ok = idx[i] == idx_ref[i] &&
                      (std::isnan(val_ref[i]) ? std::isnan(val[i]) : float_bits(val[i]) == float_bits(val_ref[i]));
      if (!ok && wrong++ < 5)
        MESSAGE("row " << i / c.k << " rank " << i % c.k << ": got (" << idx[i] << ", " << val[i] << "), want ("
                       << idx_ref[i] << ", " << val_ref[i] << ")");
    }
    CHECK(wrong == 0);
  }
}

TEST_CASE("cuda topk rejects k outside 1 to min(N, kTopKMax)") {
  auto dx = to_device(randn(64, 3));
  auto didx = poisoned<int32_t>(64);
  auto dval = poisoned<float>(64);
  CHECK_FALSE(kc::topk(ctx(), dx.get(), 2, 8, 0, didx.get(), dval.get()).ok());
  CHECK_FALSE(kc::topk(ctx(), dx.get(), 2, 8, 9, didx.get(), dval.get()).ok());
  CHECK_FALSE(kc::topk(ctx(), dx.get(), 1, 64, kc::kTopKMax + 1, didx.get(), dval.get()).ok());
  CHECK_FALSE(kc::topk(ctx(), dx.get(), -1, 8, 2, didx.get(), dval.get()).ok());
  SAL_CHECK_OK(kc::topk(ctx(), dx.get(), 0, 8, 2, didx.get(), dval.get()));  // no rows: nothing to do
}

// ---------------------------------------------------------------------------------------------
// embedding

struct EmbShape {
  int B, T, C, V;
};
// {3, 200, 5, 20}: 600 rows, ids repeated across several 256-row tiles of the dtok gather.
const EmbShape kEmbShapes[] = {{1, 1, 1, 1}, {2, 3, 5, 7}, {4, 17, 33, 50}, {3, 64, 96, 1000}, {3, 200, 5, 20},
                               {2, 40, 8, 50257}};

TEST_CASE("cuda embedding forward matches the CPU exactly") {
  for (EmbShape s : kEmbShapes) {
    CAPTURE(s.B);
    CAPTURE(s.T);
    CAPTURE(s.C);
    CAPTURE(s.V);
    const int rows = s.B * s.T, pos_rows = s.T + 3;  // pos has more rows than T
    const std::vector<int32_t> ids = rand_ints(rows, 51, 0, s.V - 1);
    const Vec tok = randn(size_t(s.V) * s.C, 52), pos = randn(size_t(pos_rows) * s.C, 53);
    Vec out_ref(size_t(rows) * s.C);
    k::embedding_forward(ids.data(), tok.data(), pos.data(), out_ref.data(), s.B, s.T, s.C, s.V);
    auto dids = to_device(ids);
    auto dtok = to_device(tok);
    auto dpos = to_device(pos);
    auto dout = poisoned<float>(out_ref.size());
    auto dbad = poisoned<int32_t>(1);
    SAL_CHECK_OK(kc::embedding_forward(ctx(), dids.get(), dtok.get(), dpos.get(), dout.get(), s.B, s.T, s.C, s.V,
                                       dbad.get()));
    CHECK(same_bits(to_host(dout), out_ref));
    CHECK(read_scalar(dbad) == 0);
  }
}

TEST_CASE("cuda embedding forward counts ids outside the vocabulary and reads no further") {
  const int B = 2, T = 5, C = 9, V = 30;
  std::vector<int32_t> ids = rand_ints(B * T, 61, 0, V - 1);
  ids[1] = -1;
  ids[6] = V;
  ids[9] = 1 << 30;
  const Vec tok = randn(size_t(V) * C, 62), pos = randn(size_t(T) * C, 63);
  auto dids = to_device(ids);
  auto dtok = to_device(tok);
  auto dpos = to_device(pos);
  auto dout = poisoned<float>(size_t(B) * T * C);
  auto dbad = poisoned<int32_t>(1);
  SAL_CHECK_OK(kc::embedding_forward(ctx(), dids.get(), dtok.get(), dpos.get(), dout.get(), B, T, C, V, dbad.get()));
  CHECK(read_scalar(dbad) == 3);
  const Vec out = to_host(dout);
  for (int r = 0; r < B * T; ++r) {
    const bool bad = ids[r] < 0 || ids[r] >= V;
    for (int c = 0; c < C; ++c) {
      const float want = bad ? pos[size_t(r % T) * C + c] : tok[size_t(ids[r]) * C + c] + pos[size_t(r % T) * C + c];
      CHECK(float_bits(out[size_t(r) * C + c]) == float_bits(want));
    }
  }
  // The count is overwritten, not added to: a clean batch reads 0 again.
  ids[1] = ids[6] = ids[9] = 0;
  auto dids_ok = to_device(ids);
  SAL_CHECK_OK(
      kc::embedding_forward(ctx(), dids_ok.get(), dtok.get(), dpos.get(), dout.get(), B, T, C, V, dbad.get()));
  CHECK(read_scalar(dbad) == 0);
  SAL_CHECK_OK(ctx().synchronize());  // no illegal address: the context is still usable
}

TEST_CASE("cuda embedding backward matches the CPU bit for bit and is deterministic") {
  for (EmbShape s : kEmbShapes) {
    CAPTURE(s.B);
    CAPTURE(s.T);
    CAPTURE(s.C);
    CAPTURE(s.V);
    const int rows = s.B * s.T, pos_rows = s.T + 3;
    // Ids from a small range so that rows repeat (the CPU adds repeats in row order).
    const std::vector<int32_t> ids = rand_ints(rows, 71, 0, std::min(s.V - 1, 12));
    const Vec g_out = randn(size_t(rows) * s.C, 72);
    const Vec dtok0 = randn(size_t(s.V) * s.C, 73), dpos0 = randn(size_t(pos_rows) * s.C, 74);
    Vec dtok_ref = dtok0, dpos_ref = dpos0;
    k::embedding_backward(ids.data(), g_out.data(), dtok_ref.data(), dpos_ref.data(), s.B, s.T, s.C);
    auto dids = to_device(ids);
    auto dg = to_device(g_out);
    std::vector<Vec> toks, poss;
    for (int run = 0; run < 2; ++run) {
      auto ddtok = to_device(dtok0);
      auto ddpos = to_device(dpos0);
      SAL_CHECK_OK(kc::embedding_backward(ctx(), dids.get(), dg.get(), ddtok.get(), ddpos.get(), s.B, s.T, s.C, s.V));
      toks.push_back(to_host(ddtok));
      poss.push_back(to_host(ddpos));
    }
    check_close(toks[0], dtok_ref, "embedding dtok");
    check_close(poss[0], dpos_ref, "embedding dpos");
    CHECK_MESSAGE(same_bits(toks[0], dtok_ref), "dtok differs from the CPU's bits");
    CHECK_MESSAGE(same_bits(poss[0], dpos_ref), "dpos differs from the CPU's bits");
    CHECK(same_bits(toks[0], toks[1]));
    CHECK(same_bits(poss[0], poss[1]));

    // Either table frozen.
    auto ddtok = to_device(dtok0);
    SAL_CHECK_OK(kc::embedding_backward(ctx(), dids.get(), dg.get(), ddtok.get(), nullptr, s.B, s.T, s.C, s.V));
    CHECK(same_bits(to_host(ddtok), dtok_ref));
    auto ddpos = to_device(dpos0);
    SAL_CHECK_OK(kc::embedding_backward(ctx(), dids.get(), dg.get(), nullptr, ddpos.get(), s.B, s.T, s.C, s.V));
    CHECK(same_bits(to_host(ddpos), dpos_ref));
  }
}

TEST_CASE("cuda embedding backward skips ids outside the vocabulary in dtok") {
  const int B = 3, T = 7, C = 6, V = 10;
  std::vector<int32_t> ids = rand_ints(B * T, 81, 0, 3);
  ids[2] = -5;
  ids[11] = V;
  const Vec g_out = randn(size_t(B) * T * C, 82), dtok0 = randn(size_t(V) * C, 83), dpos0 = randn(size_t(T) * C, 84);
  // Reference: dpos from every row; dtok as if the bad rows had zero gradient (x + 0 == x).
  Vec dtok_ref = dtok0, dpos_ref = dpos0, g_masked = g_out;
  std::vector<int32_t> ids_masked = ids;
  for (int r : {2, 11}) {
    ids_masked[r] = 0;
    for (int c = 0; c < C; ++c) g_masked[size_t(r) * C + c] = 0.0f;
  }
  k::embedding_backward(ids_masked.data(), g_masked.data(), dtok_ref.data(), nullptr, B, T, C);
  k::embedding_backward(ids.data(), g_out.data(), nullptr, dpos_ref.data(), B, T, C);
  auto dids = to_device(ids);
  auto dg = to_device(g_out);
  auto ddtok = to_device(dtok0);
  auto ddpos = to_device(dpos0);
  SAL_CHECK_OK(kc::embedding_backward(ctx(), dids.get(), dg.get(), ddtok.get(), ddpos.get(), B, T, C, V));
  CHECK(same_bits(to_host(ddtok), dtok_ref));
  CHECK(same_bits(to_host(ddpos), dpos_ref));
}

// ---------------------------------------------------------------------------------------------
// cross-entropy

struct LossShape {
  int M, V;
};
// M = 70 spans three 32-row chunks of the loss sum; V = 50257 is GPT-2's vocabulary.
const LossShape kLossShapes[] = {{1, 1}, {1, 50257}, {7, 50257}, {33, 1000}, {70, 100}, {5, 31}};

// Targets in [0, V), every third row ignored (-1), and row 1 (when there is one) -100.
std::vector<int32_t> loss_targets(int M, int V, uint32_t seed) {
  std::vector<int32_t> t = rand_ints(M, seed, 0, V - 1);
  for (int m = 2; m < M; m += 3) t[m] = -1;
  if (M > 1) t[1] = -100;
  return t;
}

TEST_CASE("cuda cross-entropy forward matches the CPU and its loss is deterministic") {
  for (LossShape s : kLossShapes) {
    CAPTURE(s.M);
    CAPTURE(s.V);
    const size_t mv = size_t(s.M) * s.V;
    const Vec logits = randn(mv, 91, 3.0f);
    const std::vector<int32_t> targets = loss_targets(s.M, s.V, 92);
    Vec probs_ref(mv);
    const double loss_ref = k::cross_entropy_forward(logits.data(), targets.data(), probs_ref.data(), s.M, s.V);
    auto dl = to_device(logits);
    auto dt = to_device(targets);
    auto scratch = poisoned<double>(kc::cross_entropy_scratch_doubles(s.M));
    std::vector<double> losses;
    for (int run = 0; run < 2; ++run) {
      auto dp = poisoned<float>(mv);
      auto dloss = poisoned<double>(1);
      auto dbad = poisoned<int32_t>(1);
      SAL_CHECK_OK(kc::cross_entropy_forward(ctx(), dl.get(), dt.get(), dp.get(), s.M, s.V, dloss.get(), dbad.get(),
                                             scratch.get()));
      check_close(to_host(dp), probs_ref, "cross-entropy probs");
      losses.push_back(read_scalar(dloss));
      CHECK(read_scalar(dbad) == 0);
    }
    CHECK(std::fabs(losses[0] - loss_ref) <= 1e-5 * std::max(1.0, std::fabs(loss_ref)));
    CHECK(same_bits(std::vector<double>{losses[0]}, std::vector<double>{losses[1]}));
  }
}

TEST_CASE("cuda cross-entropy forward with every row ignored, no rows, or a target beyond V") {
  const int M = 6, V = 40;
  const Vec logits = randn(size_t(M) * V, 101);
  auto dl = to_device(logits);
  auto dp = poisoned<float>(size_t(M) * V);
  auto scratch = poisoned<double>(kc::cross_entropy_scratch_doubles(M));
  auto dloss = poisoned<double>(1);
  auto dbad = poisoned<int32_t>(1);

  // All ignored: loss exactly 0, probs still written.
  auto dt_ignored = to_device(std::vector<int32_t>(M, -1));
  SAL_CHECK_OK(kc::cross_entropy_forward(ctx(), dl.get(), dt_ignored.get(), dp.get(), M, V, dloss.get(), dbad.get(),
                                         scratch.get()));
  CHECK(read_scalar(dloss) == 0.0);
  CHECK(read_scalar(dbad) == 0);
  Vec probs_ref(size_t(M) * V);
  const std::vector<int32_t> ignored(M, -1);
  k::cross_entropy_forward(logits.data(), ignored.data(), probs_ref.data(), M, V);
  check_close(to_host(dp), probs_ref, "cross-entropy probs (all ignored)");

  // Targets V and V + 7: counted, and those rows add nothing (the CPU's loss with them ignored).
  std::vector<int32_t> t = rand_ints(M, 102, 0, V - 1);
  t[0] = V;
  t[4] = V + 7;
  std::vector<int32_t> t_ref = t;
  t_ref[0] = t_ref[4] = -1;
  const double loss_ref = k::cross_entropy_forward(logits.data(), t_ref.data(), probs_ref.data(), M, V);
  auto dt = to_device(t);
  SAL_CHECK_OK(kc::cross_entropy_forward(ctx(), dl.get(), dt.get(), dp.get(), M, V, dloss.get(), dbad.get(),
                                         scratch.get()));
  CHECK(read_scalar(dbad) == 2);
  CHECK(std::fabs(read_scalar(dloss) - loss_ref) <= 1e-5 * std::max(1.0, std::fabs(loss_ref)));

  // No rows: loss and count overwritten with 0.
  auto dloss0 = poisoned<double>(1);
  auto dbad0 = poisoned<int32_t>(1);
  SAL_CHECK_OK(kc::cross_entropy_forward(ctx(), dl.get(), dt.get(), dp.get(), 0, V, dloss0.get(), dbad0.get(),
                                         nullptr));
  CHECK(read_scalar(dloss0) == 0.0);
  CHECK(read_scalar(dbad0) == 0);
}

TEST_CASE("cuda cross-entropy backward matches the CPU") {
  for (LossShape s : kLossShapes) {
    CAPTURE(s.M);
    CAPTURE(s.V);
    const size_t mv = size_t(s.M) * s.V;
    const Vec logits = randn(mv, 111, 3.0f);
    std::vector<int32_t> targets = loss_targets(s.M, s.V, 112);
    Vec probs(mv), d_ref(mv);
    k::cross_entropy_forward(logits.data(), targets.data(), probs.data(), s.M, s.V);
    const float scale = 1.0f / 37.0f;
    k::cross_entropy_backward(probs.data(), targets.data(), d_ref.data(), s.M, s.V, scale);
    auto dp = to_device(probs);
    auto dt = to_device(targets);
    auto dd = poisoned<float>(mv);
    SAL_CHECK_OK(kc::cross_entropy_backward(ctx(), dp.get(), dt.get(), dd.get(), s.M, s.V, scale));
    const Vec got = to_host(dd);
    check_close(got, d_ref, "cross-entropy dlogits");
    CHECK(same_bits(got, d_ref));  // the same single operations as the CPU
  }
  // A target beyond V is a zero row, nothing written outside it.
  const int M = 3, V = 20;
  const Vec probs = randn(size_t(M) * V, 113);
  auto dp = to_device(probs);
  auto dt = to_device(std::vector<int32_t>{V, 4, V + 100});
  auto dd = poisoned<float>(size_t(M) * V);
  SAL_CHECK_OK(kc::cross_entropy_backward(ctx(), dp.get(), dt.get(), dd.get(), M, V, 1.0f));
  const Vec got = to_host(dd);
  for (int i = 0; i < V; ++i) {
    CHECK(got[i] == 0.0f);
    CHECK(got[size_t(2) * V + i] == 0.0f);
    CHECK(got[size_t(V) + i] == (i == 4 ? probs[size_t(V) + i] - 1.0f : probs[size_t(V) + i]));
  }
}

// ---------------------------------------------------------------------------------------------
// optimizer

TEST_CASE("cuda adamw matches the CPU") {
  // lr = 0.5: a step of the size of p itself, so comparing p to 1e-5 checks the update to 1e-5 (with
  // a realistic lr = 3e-3 it would check the update only to ~0.3 %, and miss a wrong factor).
  const float lr = 0.5f;
  for (size_t n : {size_t(1), size_t(1000), size_t(70001)}) {
    for (int64_t t : {int64_t(1), int64_t(1000)}) {
      for (float wd : {0.0f, 0.5f}) {
        CAPTURE(n);
        CAPTURE(t);
        CAPTURE(wd);
        Vec p = randn(n, 121), g = randn(n, 122), m = randn(n, 123, 0.1f), v = randn(n, 124, 0.1f);
        for (auto& x : v) x = x * x;  // second moments are >= 0
        auto dp = to_device(p);
        auto dg = to_device(g);
        auto dm = to_device(m);
        auto dv = to_device(v);
        k::adamw(p.data(), g.data(), m.data(), v.data(), n, lr, 0.9f, 0.95f, 1e-8f, wd, t);
        SAL_CHECK_OK(kc::adamw(ctx(), dp.get(), dg.get(), dm.get(), dv.get(), n, lr, 0.9f, 0.95f, 1e-8f, wd, t));
        check_close(to_host(dp), p, "adamw p");
        check_close(to_host(dm), m, "adamw m");
        check_close(to_host(dv), v, "adamw v");
      }
    }
  }
  auto d = to_device(Vec(4, 1.0f));
  CHECK_FALSE(kc::adamw(ctx(), d.get(), d.get(), d.get(), d.get(), 4, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, 0).ok());
}

TEST_CASE("cuda sum_squares matches the CPU, accumulates, and is deterministic") {
  for (size_t n : {size_t(1), size_t(255), size_t(4097), size_t(1000003)}) {
    CAPTURE(n);
    const Vec x = randn(n, uint32_t(n) + 131), y = randn(n / 2 + 1, uint32_t(n) + 132, 3.0f);
    const double ref_x = k::sum_squares(x.data(), n), ref_y = k::sum_squares(y.data(), y.size());
    auto dx = to_device(x);
    auto dy = to_device(y);
    const size_t scratch_n = std::max(kc::sum_squares_scratch_doubles(n), kc::sum_squares_scratch_doubles(y.size()));
    CHECK(scratch_n <= kc::kSumSquaresMaxBlocks);
    auto scratch = poisoned<double>(scratch_n);
    std::vector<double> first, total;
    for (int run = 0; run < 2; ++run) {
      auto out = poisoned<double>(1);
      SAL_CHECK_OK(kc::sum_squares(ctx(), dx.get(), n, out.get(), scratch.get()));
      first.push_back(read_scalar(out));
      SAL_CHECK_OK(kc::add_sum_squares(ctx(), dy.get(), y.size(), out.get(), scratch.get()));
      total.push_back(read_scalar(out));
    }
    CHECK(std::fabs(first[0] - ref_x) <= 1e-12 * ref_x);
    CHECK(std::fabs(total[0] - (ref_x + ref_y)) <= 1e-12 * (ref_x + ref_y));
    CHECK(same_bits(first, std::vector<double>{first[0], first[0]}));
    CHECK(same_bits(total, std::vector<double>{total[0], total[0]}));
  }
  // Empty: overwrite gives 0, accumulate leaves the value.
  auto out = poisoned<double>(1);
  SAL_CHECK_OK(kc::sum_squares(ctx(), nullptr, 0, out.get(), nullptr));
  CHECK(read_scalar(out) == 0.0);
  auto dx = to_device(Vec{3.0f});
  auto scratch = poisoned<double>(kc::sum_squares_scratch_doubles(1));
  SAL_CHECK_OK(kc::sum_squares(ctx(), dx.get(), 1, out.get(), scratch.get()));
  SAL_CHECK_OK(kc::add_sum_squares(ctx(), nullptr, 0, out.get(), nullptr));
  CHECK(read_scalar(out) == 9.0);
}

TEST_CASE("cuda scale and clip_scale match the CPU's scaling and clipping rule") {
  for (size_t n : {size_t(1), size_t(300), size_t(70001)}) {
    CAPTURE(n);
    const Vec x = randn(n, uint32_t(n) + 141);
    Vec ref = x;
    k::scale(ref.data(), n, 0.37f);
    auto dx = to_device(x);
    SAL_CHECK_OK(kc::scale(ctx(), dx.get(), n, 0.37f));
    CHECK(same_bits(to_host(dx), ref));
  }
  // engine/model/optimizer.cpp: factor = clip / norm when 0 < clip < norm and norm is finite, else 1.
  struct Case {
    double sum, max_norm;
  };
  const Case cases[] = {{16.0, 1.0}, {16.0, 3.999}, {16.0, 4.0}, {16.0, 10.0}, {16.0, 0.0}, {16.0, -1.0},
                        {INFINITY, 1.0}, {NAN, 1.0}, {2.0, 0.5}};
  const size_t n = 1001;
  const Vec x = randn(n, 151);
  for (Case c : cases) {
    CAPTURE(c.sum);
    CAPTURE(c.max_norm);
    const double norm = std::sqrt(c.sum);
    const double factor = (c.max_norm <= 0 || norm <= c.max_norm || !std::isfinite(norm)) ? 1.0 : c.max_norm / norm;
    Vec ref = x;
    if (factor != 1.0) k::scale(ref.data(), n, float(factor));
    auto dx = to_device(x);
    auto dsum = to_device(std::vector<double>{c.sum});
    SAL_CHECK_OK(kc::clip_scale(ctx(), dx.get(), n, dsum.get(), c.max_norm));
    CHECK(same_bits(to_host(dx), ref));
  }
}

// ---------------------------------------------------------------------------------------------
// argument checks

TEST_CASE("cuda elementwise kernels reject bad arguments and accept empty sizes") {
  auto& c = ctx();
  auto f = to_device(Vec(64, 1.0f));
  auto i = to_device(std::vector<int32_t>(8, 0));
  auto d = to_device(std::vector<double>(8, 0.0));
  float* p = f.get();
  CHECK_FALSE(kc::to_bf16(c, nullptr, nullptr, 4).ok());
  CHECK_FALSE(kc::gelu_forward(c, nullptr, p, 4).ok());
  CHECK_FALSE(kc::layernorm_forward(c, p, p, p, p, p, p, -1, 4).ok());
  CHECK_FALSE(kc::layernorm_backward(c, p, p + 8, p, p, p, p, nullptr, nullptr, 2, 4, nullptr).ok());  // dx == dy
  CHECK_FALSE(kc::layernorm_backward(c, p, p + 8, p, p, p, p + 16, p, nullptr, 2, 4, nullptr).ok());   // no scratch
  CHECK_FALSE(kc::softmax_forward(c, p, p, 2, -4).ok());
  CHECK_FALSE(kc::embedding_forward(c, i.get(), p, p, p, 2, 2, 2, 4, nullptr).ok());  // no bad-id count
  CHECK_FALSE(kc::embedding_backward(c, i.get(), p, p, p, -2, 2, 2, 4).ok());
  CHECK_FALSE(kc::cross_entropy_forward(c, p, i.get(), p, 2, 4, d.get(), i.get(), d.get()).ok());  // probs == logits
  CHECK_FALSE(kc::cross_entropy_forward(c, p, i.get(), p + 8, 2, 4, nullptr, i.get(), d.get()).ok());
  CHECK_FALSE(kc::cross_entropy_backward(c, p, i.get(), p, -1, 4, 1.0f).ok());
  CHECK_FALSE(kc::sum_squares(c, p, 4, nullptr, d.get()).ok());
  CHECK_FALSE(kc::clip_scale(c, p, 4, nullptr, 1.0).ok());
  // Empty sizes launch nothing (null pointers are fine then).
  SAL_CHECK_OK(kc::to_bf16(c, nullptr, nullptr, 0));
  SAL_CHECK_OK(kc::to_float(c, nullptr, nullptr, 0));
  SAL_CHECK_OK(kc::gelu_forward(c, nullptr, nullptr, 0));
  SAL_CHECK_OK(kc::gelu_backward(c, nullptr, nullptr, nullptr, 0));
  SAL_CHECK_OK(kc::layernorm_forward(c, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0, 8));
  SAL_CHECK_OK(kc::layernorm_backward(c, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 8, 0,
                                      nullptr));
  SAL_CHECK_OK(kc::softmax_forward(c, nullptr, nullptr, 0, 8));
  SAL_CHECK_OK(kc::softmax_backward(c, nullptr, nullptr, nullptr, 8, 0));
  SAL_CHECK_OK(kc::embedding_backward(c, nullptr, nullptr, nullptr, nullptr, 0, 4, 8, 10));
  SAL_CHECK_OK(kc::cross_entropy_backward(c, nullptr, nullptr, nullptr, 0, 10, 1.0f));
  SAL_CHECK_OK(kc::adamw(c, nullptr, nullptr, nullptr, nullptr, 0, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, 1));
  SAL_CHECK_OK(kc::scale(c, nullptr, 0, 2.0f));
  SAL_CHECK_OK(kc::clip_scale(c, nullptr, 0, nullptr, 1.0));
  SAL_CHECK_OK(c.synchronize());
}

}  // namespace
