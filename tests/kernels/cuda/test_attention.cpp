// test_attention.cpp — kernels/cuda/attention.h against kernels/cpu/attention.h: forward (out,
// probs with its zero upper triangle) and backward (dq, dk, dv parts of dqkv) for several
// (B, T, C, H), T = 1 and T not a multiple of 32 included, outputs poisoned first. qkv and dout
// are rounded to bf16 on the host so the scores match the CPU's to fp32 precision; what remains of
// kBf16Tol is the rounding of P and dS for the later products.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/cuda_test_util.h"

namespace sal::test::gpu {
namespace {

namespace cpu = sal::kernels::cpu;

// Columns [c0, c0 + C) of every row of a [rows, ld] matrix.
std::vector<float> columns(const std::vector<float>& m, int ld, int c0, int C) {
  const size_t rows = m.size() / size_t(ld);
  std::vector<float> r(rows * size_t(C));
  for (size_t i = 0; i < rows; ++i)
    for (int j = 0; j < C; ++j) r[i * C + j] = m[i * ld + c0 + j];
  return r;
}

void check_attention(int B, int T, int C, int H, uint32_t seed) {
  CAPTURE(B);
  CAPTURE(T);
  CAPTURE(C);
  CAPTURE(H);
  const size_t rows = size_t(B) * T, P = size_t(B) * H * T * T;
  const auto qkv = round_bf16(randn(rows * 3 * C, seed));
  const auto dout = round_bf16(randn(rows * C, seed + 1));

  std::vector<float> out_ref(rows * C), probs_ref(P), dqkv_ref(rows * 3 * C);
  cpu::attention_forward(qkv.data(), out_ref.data(), probs_ref.data(), B, T, C, H);
  cpu::attention_backward(dout.data(), qkv.data(), probs_ref.data(), dqkv_ref.data(), B, T, C, H);

  auto dqkv_in = to_device(qkv), ddout = to_device(dout);
  auto out = poisoned<float>(rows * C), probs = poisoned<float>(P), dqkv = poisoned<float>(rows * 3 * C);
  const size_t bytes = kc::attention_scratch_bytes(B, T, C, H);
  auto scratch = poisoned<unsigned char>(bytes);
  SAL_CHECK_OK(kc::attention_forward(ctx(), dqkv_in.get(), out.get(), probs.get(), B, T, C, H, scratch.get(), bytes));
  // The backward runs on the GPU's own probs, as in training.
  SAL_CHECK_OK(kc::attention_backward(ctx(), ddout.get(), dqkv_in.get(), probs.get(), dqkv.get(), B, T, C, H,
                                      scratch.get(), bytes));

  const auto p = to_host(probs);
  CHECK(rel_error(p, probs_ref) < 1e-4);  // fp32 softmax of fp32-exact scores
  CHECK(max_scaled(p, probs_ref) < 1e-4);
  for (size_t i = 0; i < size_t(B) * H; ++i)
    for (int t = 0; t < T; ++t)
      for (int j = t + 1; j < T; ++j) REQUIRE(p[(i * T + t) * T + j] == 0.0f);

  const auto o = to_host(out);
  CHECK(rel_error(o, out_ref) < kBf16Tol);
  CHECK(max_scaled(o, out_ref) < 2 * kBf16Tol);

  const auto g = to_host(dqkv);
  const char* part[] = {"dq", "dk", "dv"};
  for (int k = 0; k < 3; ++k) {
    CAPTURE(part[k]);
    const auto got = columns(g, 3 * C, k * C, C), ref = columns(dqkv_ref, 3 * C, k * C, C);
    CHECK(rel_error(got, ref) < kBf16Tol);
    CHECK(max_scaled(got, ref) < 2 * kBf16Tol);
  }
}

}  // namespace

TEST_CASE("cuda attention forward and backward match cpu") {
  check_attention(1, 1, 8, 2, 10);     // T = 1: each query sees only itself
  check_attention(2, 5, 12, 3, 20);
  check_attention(2, 37, 64, 4, 30);   // T not a multiple of 32
  check_attention(1, 67, 32, 1, 40);   // one head
  check_attention(1, 33, 6, 6, 50);    // hs = 1
  check_attention(3, 130, 48, 4, 60);  // T > the CPU's 64-query blocks, hs = 12
}

TEST_CASE("cuda attention handles empty sizes and rejects bad ones") {
  auto buf = poisoned<float>(64);
  auto scratch = poisoned<unsigned char>(1024);
  // B == 0 or T == 0: nothing to do, nothing written.
  SAL_CHECK_OK(kc::attention_forward(ctx(), buf.get(), buf.get(), buf.get(), 0, 4, 8, 2, nullptr, 0));
  SAL_CHECK_OK(kc::attention_backward(ctx(), buf.get(), buf.get(), buf.get(), buf.get(), 2, 0, 8, 2, nullptr, 0));
  for (float v : to_host(buf)) REQUIRE(std::isnan(v));
  // C not divisible by H, too little scratch.
  CHECK_FALSE(kc::attention_forward(ctx(), buf.get(), buf.get(), buf.get(), 1, 2, 6, 4, scratch.get(), 1024).ok());
  const size_t need = kc::attention_scratch_bytes(1, 2, 8, 2);
  CHECK(need > 0);
  CHECK_FALSE(kc::attention_forward(ctx(), buf.get(), buf.get(), buf.get(), 1, 2, 8, 2, scratch.get(), need - 1).ok());
}

}  // namespace sal::test::gpu
