// test_gemm.cpp — kernels/cuda/gemm.h and grouped_gemm.h against kernels/cpu: the dense products
// in every transpose combination and beta, odd and empty sizes, leading dimensions, the strided
// batch, the bias kernels, and the grouped expert MLP (both modes) against the expert of
// engine/model/expert.cpp composed from kernels/cpu ops. bf16 operands are rounded on the host
// first and the CPU reference gets the same rounded values, so a bf16-operand product with fp32
// accumulation must match the fp32 reference to accumulation order (1e-4), and what remains of
// kBf16Tol is the bf16 rounding of intermediate results.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cuda/cuda_test_util.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/grouped_gemm.h"

namespace sal::test::gpu {
namespace {

namespace cpu = sal::kernels::cpu;
using kc::Bf16;

// Accumulation-order tolerance of a product whose operands are exact in bf16.
constexpr double kExactOperandTol = 1e-4;

std::vector<Bf16> to_bf16(const std::vector<float>& v) {
  std::vector<Bf16> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = __float2bfloat16_rn(v[i]);
  return b;
}

std::vector<float> to_float(const std::vector<Bf16>& v) {
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i) f[i] = __bfloat162float(v[i]);
  return f;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

struct Dims {
  int M, N, K;
};
// Every one of 1, 3, 67, 130 in every position.
const Dims kShapes[] = {{1, 1, 1},   {3, 67, 130}, {67, 130, 3}, {130, 3, 67},
                        {1, 130, 67}, {67, 1, 3},   {130, 67, 1}, {3, 3, 130}};

// Operand sizes of a row-major product.
size_t a_size(const Dims& s) { return size_t(s.M) * s.K; }
size_t b_size(const Dims& s) { return size_t(s.K) * s.N; }
size_t c_size(const Dims& s) { return size_t(s.M) * s.N; }

// Runs f on every shape of kShapes in every transpose, with beta 0 and 1, each case captured.
template <class F>
void each_product(F f) {
  for (const Dims& s : kShapes)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (float beta : {0.0f, 1.0f}) {
          CAPTURE(s.M);
          CAPTURE(s.N);
          CAPTURE(s.K);
          CAPTURE(ta);
          CAPTURE(tb);
          CAPTURE(beta);
          f(s, ta != 0, tb != 0, beta);
        }
}

}  // namespace

TEST_CASE("cuda gemm with bf16 operands matches cpu gemm in every transpose and beta") {
  uint32_t seed = 100;
  each_product([&](const Dims& s, bool ta, bool tb, float beta) {
    const auto A = round_bf16(randn(a_size(s), seed++)), B = round_bf16(randn(b_size(s), seed++));
    const auto C0 = randn(c_size(s), seed++);
    std::vector<float> ref = beta == 0 ? std::vector<float>(c_size(s), 0.0f) : C0;
    cpu::gemm(ta, tb, s.M, s.N, s.K, 0.75f, A.data(), B.data(), beta, ref.data());

    auto dA = to_device(to_bf16(A)), dB = to_device(to_bf16(B));
    auto dC = beta == 0 ? poisoned<float>(c_size(s)) : to_device(C0);
    SAL_CHECK_OK(kc::gemm(ctx(), ta, tb, s.M, s.N, s.K, 0.75f, dA.get(), dB.get(), beta, dC.get()));
    const auto got = to_host(dC);
    CHECK(rel_error(got, ref) < kExactOperandTol);
    CHECK(max_scaled(got, ref) < kExactOperandTol * 10);
  });
}

TEST_CASE("cuda gemm_f32 matches cpu gemm to fp32 precision") {
  uint32_t seed = 200;
  each_product([&](const Dims& s, bool ta, bool tb, float beta) {
    const auto A = randn(a_size(s), seed++), B = randn(b_size(s), seed++), C0 = randn(c_size(s), seed++);
    std::vector<float> ref = beta == 0 ? std::vector<float>(c_size(s), 0.0f) : C0;
    cpu::gemm(ta, tb, s.M, s.N, s.K, 1.25f, A.data(), B.data(), beta, ref.data());

    auto dA = to_device(A), dB = to_device(B);
    auto dC = beta == 0 ? poisoned<float>(c_size(s)) : to_device(C0);
    SAL_CHECK_OK(kc::gemm_f32(ctx(), ta, tb, s.M, s.N, s.K, 1.25f, dA.get(), dB.get(), beta, dC.get()));
    const auto got = to_host(dC);
    CHECK(rel_error(got, ref) < kFp32Tol);
    CHECK(max_scaled(got, ref) < kFp32Tol);
  });
}

TEST_CASE("cuda gemm_bf16 rounds the fp32 product once") {
  uint32_t seed = 300;
  each_product([&](const Dims& s, bool ta, bool tb, float beta) {
    const auto A = round_bf16(randn(a_size(s), seed++)), B = round_bf16(randn(b_size(s), seed++));
    const auto C0 = round_bf16(randn(c_size(s), seed++));
    std::vector<float> ref = beta == 0 ? std::vector<float>(c_size(s), 0.0f) : C0;
    cpu::gemm(ta, tb, s.M, s.N, s.K, 1.0f, A.data(), B.data(), beta, ref.data());

    auto dA = to_device(to_bf16(A)), dB = to_device(to_bf16(B));
    auto dC = beta == 0 ? poisoned<Bf16>(c_size(s)) : to_device(to_bf16(C0));
    SAL_CHECK_OK(kc::gemm_bf16(ctx(), ta, tb, s.M, s.N, s.K, 1.0f, dA.get(), ta ? s.M : s.K, dB.get(),
                               tb ? s.K : s.N, beta, dC.get(), s.N));
    const auto got = to_float(to_host(dC));
    CHECK(rel_error(got, ref) < kBf16Tol);
    CHECK(max_scaled(got, ref) < kBf16Tol);
  });
}

TEST_CASE("cuda gemm with K = 0 leaves beta times C and empty M or N touch nothing") {
  const int M = 3, N = 67;
  const auto C0 = randn(size_t(M) * N, 7);
  for (float beta : {0.0f, 1.0f, 0.5f}) {
    CAPTURE(beta);
    std::vector<float> ref(C0.size());
    for (size_t i = 0; i < ref.size(); ++i) ref[i] = beta == 0 ? 0.0f : beta * C0[i];
    // K == 0: A and B are never read (null here); beta == 0 overwrites the NaN poison with zeros.
    auto dC = beta == 0 ? poisoned<float>(C0.size()) : to_device(C0);
    SAL_CHECK_OK(kc::gemm(ctx(), false, false, M, N, 0, 1.0f, nullptr, nullptr, beta, dC.get()));
    CHECK(same_bits(to_host(dC), ref));
    auto dC32 = beta == 0 ? poisoned<float>(C0.size()) : to_device(C0);
    SAL_CHECK_OK(kc::gemm_f32(ctx(), true, true, M, N, 0, 1.0f, nullptr, nullptr, beta, dC32.get()));
    CHECK(same_bits(to_host(dC32), ref));
    auto dC16 = beta == 0 ? poisoned<Bf16>(C0.size()) : to_device(to_bf16(C0));
    SAL_CHECK_OK(kc::gemm_bf16(ctx(), false, true, M, N, 0, 1.0f, nullptr, 1, nullptr, 1, beta, dC16.get(), N));
    CHECK(max_scaled(to_float(to_host(dC16)), ref) < kBf16Tol);
  }
  // M == 0 or N == 0: nothing is read or written (the poison stays).
  auto dC = poisoned<float>(C0.size());
  SAL_CHECK_OK(kc::gemm(ctx(), false, false, 0, N, 5, 1.0f, nullptr, nullptr, 0.0f, dC.get()));
  SAL_CHECK_OK(kc::gemm(ctx(), false, false, M, 0, 5, 1.0f, nullptr, nullptr, 0.0f, dC.get()));
  SAL_CHECK_OK(kc::gemm_strided_batched(ctx(), false, false, M, N, 5, 1.0f, nullptr, 5, 0, nullptr, N, 0, 0.0f,
                                        dC.get(), N, 0, 0));
  for (float v : to_host(dC)) REQUIRE(std::isnan(v));
}

TEST_CASE("cuda gemm rejects bad sizes and leading dimensions") {
  auto d = poisoned<Bf16>(64);
  auto c = poisoned<float>(64);
  CHECK_FALSE(kc::gemm(ctx(), false, false, -1, 2, 2, 1.0f, d.get(), d.get(), 0.0f, c.get()).ok());
  CHECK_FALSE(kc::gemm_ld(ctx(), false, false, 2, 2, 4, 1.0f, d.get(), 3, d.get(), 2, 0.0f, c.get(), 2).ok());
  CHECK_FALSE(kc::gemm_ld(ctx(), true, false, 4, 2, 2, 1.0f, d.get(), 3, d.get(), 2, 0.0f, c.get(), 2).ok());
  CHECK_FALSE(kc::gemm_ld(ctx(), false, true, 2, 4, 2, 1.0f, d.get(), 2, d.get(), 1, 0.0f, c.get(), 4).ok());
  CHECK_FALSE(kc::gemm_ld(ctx(), false, false, 2, 4, 2, 1.0f, d.get(), 2, d.get(), 4, 0.0f, c.get(), 3).ok());
  CHECK_FALSE(kc::gemm(ctx(), false, false, 2, 2, 2, 1.0f, nullptr, d.get(), 0.0f, c.get()).ok());
  CHECK_FALSE(kc::bias_grad(ctx(), nullptr, c.get(), 2, 2).ok());
}

TEST_CASE("cuda gemm_ld works on blocks inside larger matrices and leaves the rest alone") {
  // C is a 5 x 7 block at column 2 of a [5, 12] matrix; A and B are blocks with padded rows.
  const int M = 5, N = 7, K = 9, ldc = 12, pad = 3;
  uint32_t seed = 400;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      CAPTURE(ta);
      CAPTURE(tb);
      const int lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad;
      const auto A = round_bf16(randn(size_t(ta ? K : M) * lda, seed++));
      const auto B = round_bf16(randn(size_t(tb ? N : K) * ldb, seed++));
      const auto C0 = randn(size_t(M) * ldc, seed++);
      auto ref = C0;
      cpu::gemm_ld(ta, tb, M, N, K, 1.0f, A.data(), lda, B.data(), ldb, 1.0f, ref.data() + 2, ldc);
      auto dA = to_device(to_bf16(A)), dB = to_device(to_bf16(B));
      auto dC = to_device(C0);
      SAL_CHECK_OK(kc::gemm_ld(ctx(), ta, tb, M, N, K, 1.0f, dA.get(), lda, dB.get(), ldb, 1.0f, dC.get() + 2, ldc));
      const auto got = to_host(dC);
      CHECK(rel_error(got, ref) < kExactOperandTol);
      for (int m = 0; m < M; ++m)
        for (int n = 0; n < ldc; ++n)
          if (n < 2 || n >= 2 + N) REQUIRE(got[size_t(m) * ldc + n] == C0[size_t(m) * ldc + n]);
    }
}

TEST_CASE("cuda gemm_strided_batched matches one cpu gemm per batch") {
  const int M = 5, N = 7, K = 9, batch = 3;
  uint32_t seed = 500;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (float beta : {0.0f, 1.0f}) {
        CAPTURE(ta);
        CAPTURE(tb);
        CAPTURE(beta);
        const int lda = ta ? M : K, ldb = tb ? K : N;
        // Strides larger than a block: the gaps must be neither read into C nor written.
        const long long sa = M * K + 4, sb = K * N + 1, sc = M * N + 2;
        const auto A = round_bf16(randn(size_t(sa) * batch, seed++));
        const auto B = round_bf16(randn(size_t(sb) * batch, seed++));
        const auto C0 = randn(size_t(sc) * batch, seed++);
        auto ref = C0;
        for (int i = 0; i < batch; ++i)
          cpu::gemm_ld(ta, tb, M, N, K, 0.5f, A.data() + i * sa, lda, B.data() + i * sb, ldb, beta,
                       ref.data() + i * sc, N);
        auto dA = to_device(to_bf16(A)), dB = to_device(to_bf16(B));
      auto dC = to_device(C0);
        SAL_CHECK_OK(kc::gemm_strided_batched(ctx(), ta, tb, M, N, K, 0.5f, dA.get(), lda, sa, dB.get(), ldb, sb, beta,
                                              dC.get(), N, sc, batch));
        const auto got = to_host(dC);
        CHECK(rel_error(got, ref) < kExactOperandTol);
        CHECK(max_scaled(got, ref) < kExactOperandTol * 10);
        for (int i = 0; i < batch; ++i)
          for (long long j = M * N; j < sc; ++j) REQUIRE(got[i * sc + j] == C0[i * sc + j]);
      }
}

TEST_CASE("cuda add_bias and bias_grad match cpu") {
  const Dims shapes[] = {{1, 1, 0}, {3, 67, 0}, {130, 33, 0}, {1000, 5, 0}, {17, 130, 0}};
  uint32_t seed = 600;
  for (const Dims& s : shapes) {
    CAPTURE(s.M);
    CAPTURE(s.N);
    const auto y0 = randn(c_size(s), seed++), b = randn(size_t(s.N), seed++), db0 = randn(size_t(s.N), seed++);
    auto y_ref = y0;
    cpu::add_bias(y_ref.data(), b.data(), s.M, s.N);
    auto dy = to_device(y0), dbias = to_device(b);
    SAL_CHECK_OK(kc::add_bias(ctx(), dy.get(), dbias.get(), s.M, s.N));
    CHECK(same_bits(to_host(dy), y_ref));  // one fp32 addition per element: exact

    auto db_ref = db0;
    cpu::bias_grad(y0.data(), db_ref.data(), s.M, s.N);
    auto dy0 = to_device(y0), ddb = to_device(db0);
    SAL_CHECK_OK(kc::bias_grad(ctx(), dy0.get(), ddb.get(), s.M, s.N));
    const auto got = to_host(ddb);
    CHECK(rel_error(got, db_ref) < kFp32Tol);
    CHECK(max_scaled(got, db_ref) < kFp32Tol);
    // Deterministic: the same sums again, bit for bit.
    auto ddb2 = to_device(db0);
    SAL_CHECK_OK(kc::bias_grad(ctx(), dy0.get(), ddb2.get(), s.M, s.N));
    CHECK(same_bits(to_host(ddb2), got));
  }
}

// ---- grouped expert MLP ------------------------------------------------------------------------

namespace {

// One expert on the host (weights already rounded to bf16 values) and on the device.
struct HostExpert {
  std::vector<float> w1, b1, w2, b2;                  // [d,F], [F], [F,d], [d]
  std::vector<float> g1, gb1, g2, gb2;                // initial gradients (random: they accumulate)
};

struct DeviceExpert {
  kc::Buffer<Bf16> w1, w2;
  kc::Buffer<float> b1, b2, g1, gb1, g2, gb2;
};

// expert_forward / expert_backward of engine/model/expert.cpp on one block of m rows, from kernels/cpu.
void ref_expert(int d, int m, HostExpert& e, const float* x, const float* dout, float* out, float* h, float* dx) {
  const int F = 4 * d;
  if (m == 0) return;
  std::vector<float> a(size_t(m) * F), da(a.size()), dh(a.size());
  cpu::gemm(false, false, m, F, d, 1.0f, x, e.w1.data(), 0.0f, h);
  cpu::add_bias(h, e.b1.data(), m, F);
  cpu::gelu_forward(h, a.data(), a.size());
  cpu::gemm(false, false, m, d, F, 1.0f, a.data(), e.w2.data(), 0.0f, out);
  cpu::add_bias(out, e.b2.data(), m, d);

  cpu::gemm(true, false, F, d, m, 1.0f, a.data(), dout, 1.0f, e.g2.data());
  cpu::bias_grad(dout, e.gb2.data(), m, d);
  cpu::gemm(false, true, m, F, d, 1.0f, dout, e.w2.data(), 0.0f, da.data());
  cpu::gelu_backward(h, da.data(), dh.data(), dh.size());
  cpu::gemm(true, false, d, F, m, 1.0f, x, dh.data(), 1.0f, e.g1.data());
  cpu::bias_grad(dh.data(), e.gb1.data(), m, F);
  cpu::gemm(false, true, m, d, F, 1.0f, dh.data(), e.w1.data(), 0.0f, dx);
}

std::vector<float> minus(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> r(a.size());
  for (size_t i = 0; i < a.size(); ++i) r[i] = a[i] - b[i];
  return r;
}

void check_close(const char* what, const std::vector<float>& got, const std::vector<float>& ref) {
  CAPTURE(what);
  CHECK(rel_error(got, ref) < kBf16Tol);
  CHECK(max_scaled(got, ref) < 2 * kBf16Tol);
}

// Runs forward + backward of G experts with the given row counts in `mode` and compares with the
// CPU expert, expert by expert; empty experts must keep their gradients bit for bit.
void check_expert_mlp(kc::GroupedGemmMode mode, int d, const std::vector<int>& rows, uint32_t seed) {
  const int G = int(rows.size()), F = 4 * d;
  int R = 0;
  for (int m : rows) R += m;
  CAPTURE(int(mode));
  CAPTURE(d);
  CAPTURE(G);
  CAPTURE(R);

  std::vector<HostExpert> host(G);
  for (int g = 0; g < G; ++g) {
    HostExpert& e = host[g];
    e.w1 = round_bf16(randn(size_t(d) * F, seed++, 1.0f / std::sqrt(float(d))));
    e.w2 = round_bf16(randn(size_t(F) * d, seed++, 1.0f / std::sqrt(float(F))));
    e.b1 = randn(size_t(F), seed++, 0.5f);  // distinct biases: rows given the wrong expert's show
    e.b2 = randn(size_t(d), seed++, 0.5f);
    e.g1 = randn(size_t(d) * F, seed++, 0.1f);
    e.gb1 = randn(size_t(F), seed++, 0.1f);
    e.g2 = randn(size_t(F) * d, seed++, 0.1f);
    e.gb2 = randn(size_t(d), seed++, 0.1f);
  }
  const auto x = round_bf16(randn(size_t(R) * d, seed++));
  const auto dout = randn(size_t(R) * d, seed++);

  // Device copies (before the reference accumulates into host gradients).
  std::vector<DeviceExpert> dev(G);
  std::vector<kc::ExpertParams> params(G);
  std::vector<kc::ExpertGrads> grads(G);
  for (int g = 0; g < G; ++g) {
    DeviceExpert& e = dev[g];
    e.w1 = to_device(to_bf16(host[g].w1)), e.w2 = to_device(to_bf16(host[g].w2));
    e.b1 = to_device(host[g].b1), e.b2 = to_device(host[g].b2);
    e.g1 = to_device(host[g].g1), e.gb1 = to_device(host[g].gb1);
    e.g2 = to_device(host[g].g2), e.gb2 = to_device(host[g].gb2);
    params[g] = {e.w1.get(), e.b1.get(), e.w2.get(), e.b2.get()};
    grads[g] = {e.g1.get(), e.gb1.get(), e.g2.get(), e.gb2.get()};
  }
  const std::vector<HostExpert> initial = host;

  std::vector<float> out_ref(size_t(R) * d), h_ref(size_t(R) * F), dx_ref(size_t(R) * d);
  for (int g = 0, r = 0; g < G; r += rows[g], ++g)
    ref_expert(d, rows[g], host[g], x.data() + size_t(r) * d, dout.data() + size_t(r) * d,
               out_ref.data() + size_t(r) * d, h_ref.data() + size_t(r) * F, dx_ref.data() + size_t(r) * d);

  auto dx_in = to_device(x), ddout = to_device(dout);
  auto out = poisoned<float>(size_t(R) * d), dx = poisoned<float>(size_t(R) * d);
  auto saved_x = poisoned<Bf16>(size_t(R) * d);
  auto saved_h = poisoned<float>(size_t(R) * F);
  const size_t scratch_bytes = kc::expert_mlp_scratch_bytes(R, d);
  auto scratch = poisoned<unsigned char>(scratch_bytes);
  const kc::ExpertSaved saved{saved_x.get(), saved_h.get()};

  SAL_CHECK_OK(kc::expert_mlp_forward(ctx(), mode, G, rows.data(), d, params.data(), dx_in.get(), out.get(), saved,
                                      scratch.get(), scratch_bytes));
  SAL_CHECK_OK(kc::expert_mlp_backward(ctx(), mode, G, rows.data(), d, params.data(), saved, ddout.get(), dx.get(),
                                       grads.data(), scratch.get(), scratch_bytes));
  if (R > 0) {
    check_close("out", to_host(out), out_ref);
    if (mode == kc::GroupedGemmMode::fused) {  // bf16 pre-activations in the first half of saved.h
      std::vector<float> raw = to_host(saved_h);
      std::vector<Bf16> h16(size_t(R) * F);
      std::memcpy(static_cast<void*>(h16.data()), raw.data(), h16.size() * sizeof(Bf16));
      check_close("h (bf16)", to_float(h16), h_ref);
    } else {
      check_close("h", to_host(saved_h), h_ref);
    }
    check_close("dx", to_host(dx), dx_ref);
    CHECK(same_bits(to_float(to_host(saved_x)), x));  // x was exact in bf16
  }
  for (int g = 0; g < G; ++g) {
    CAPTURE(g);
    CAPTURE(rows[g]);
    const DeviceExpert& e = dev[g];
    const HostExpert &ref = host[g], &init = initial[g];
    if (rows[g] == 0) {  // skipped: untouched
      CHECK(same_bits(to_host(e.g1), init.g1));
      CHECK(same_bits(to_host(e.gb1), init.gb1));
      CHECK(same_bits(to_host(e.g2), init.g2));
      CHECK(same_bits(to_host(e.gb2), init.gb2));
      continue;
    }
    // Compare what was added (the initial values would dilute the error).
    check_close("dW1", minus(to_host(e.g1), init.g1), minus(ref.g1, init.g1));
    check_close("db1", minus(to_host(e.gb1), init.gb1), minus(ref.gb1, init.gb1));
    check_close("dW2", minus(to_host(e.g2), init.g2), minus(ref.g2, init.g2));
    check_close("db2", minus(to_host(e.gb2), init.gb2), minus(ref.gb2, init.gb2));
  }
}

// Row counts of G experts: 1..3 rows, every ninth expert empty (G = 45 gives 40 non-empty experts:
// two chunks of the grouped path).
std::vector<int> many_rows(int G) {
  std::vector<int> r(G);
  for (int g = 0; g < G; ++g) r[g] = g % 9 == 4 ? 0 : 1 + g % 3;
  return r;
}

}  // namespace

TEST_CASE("cuda expert MLP matches the cpu expert in grouped, per-group and fused modes") {
  for (auto mode : {kc::GroupedGemmMode::grouped, kc::GroupedGemmMode::per_group, kc::GroupedGemmMode::fused}) {
    check_expert_mlp(mode, 8, {5, 0, 17, 1}, 1000);
    check_expert_mlp(mode, 64, {33, 0, 0, 70, 2}, 2000);
    check_expert_mlp(mode, 16, {1}, 3000);
    check_expert_mlp(mode, 24, {0, 0}, 4000);  // no rows at all: nothing runs
    check_expert_mlp(mode, 8, many_rows(45), 5000);  // more non-empty experts than one chunk (32)
  }
  // Widths that are not a multiple of 8 run per group.
  check_expert_mlp(kc::GroupedGemmMode::per_group, 12, {3, 9, 0, 4}, 6000);
  check_expert_mlp(kc::GroupedGemmMode::per_group, 5, {2, 1}, 7000);
}

TEST_CASE("cuda expert MLP rejects bad arguments") {
  const int d = 12, R = 4;
  std::vector<int> rows = {R};
  auto w1 = poisoned<Bf16>(size_t(d) * 4 * d), w2 = poisoned<Bf16>(size_t(d) * 4 * d);
  auto b1 = poisoned<float>(size_t(4) * d), b2 = poisoned<float>(size_t(d));
  auto x = poisoned<float>(size_t(R) * d), out = poisoned<float>(size_t(R) * d);
  auto sx = poisoned<Bf16>(size_t(R) * d);
  auto sh = poisoned<float>(size_t(R) * 4 * d);
  const size_t bytes = kc::expert_mlp_scratch_bytes(R, d);
  auto scratch = poisoned<unsigned char>(bytes);
  kc::ExpertParams p{w1.get(), b1.get(), w2.get(), b2.get()};
  const kc::ExpertSaved saved{sx.get(), sh.get()};
  // Grouped mode needs d % 8 == 0.
  CHECK_FALSE(kc::expert_mlp_forward(ctx(), kc::GroupedGemmMode::grouped, 1, rows.data(), d, &p, x.get(), out.get(),
                                     saved, scratch.get(), bytes)
                  .ok());
  // So does fused mode.
  CHECK_FALSE(kc::expert_mlp_forward(ctx(), kc::GroupedGemmMode::fused, 1, rows.data(), d, &p, x.get(), out.get(),
                                     saved, scratch.get(), bytes)
                  .ok());
  // Too little scratch.
  CHECK_FALSE(kc::expert_mlp_forward(ctx(), kc::GroupedGemmMode::per_group, 1, rows.data(), d, &p, x.get(), out.get(),
                                     saved, scratch.get(), bytes - 1)
                  .ok());
  // Negative rows, null weights.
  std::vector<int> bad = {-1};
  CHECK_FALSE(kc::expert_mlp_forward(ctx(), kc::GroupedGemmMode::per_group, 1, bad.data(), d, &p, x.get(), out.get(),
                                     saved, scratch.get(), bytes)
                  .ok());
  kc::ExpertParams none{};
  CHECK_FALSE(kc::expert_mlp_forward(ctx(), kc::GroupedGemmMode::per_group, 1, rows.data(), d, &none, x.get(),
                                     out.get(), saved, scratch.get(), bytes)
                  .ok());
  // Nothing was launched: out still poisoned.
  for (float v : to_host(out)) REQUIRE(std::isnan(v));
}

}  // namespace sal::test::gpu
