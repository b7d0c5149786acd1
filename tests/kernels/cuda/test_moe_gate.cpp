// test_moe_gate.cpp — the gate-side kernels of the GPU model (kernels/cuda/moe_gate.h) against the
// loops engine/model/moe_gpt.cpp runs on the CPU: the per-expert probability sums in double, the
// gradient reaching the gate probabilities (exact bits), the gathered combine weights (exact) and the
// residual add (exact). Random inputs, several shapes including empty and odd ones; outputs
// poisoned first.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/cuda/moe_gate.h"

namespace {

using namespace sal::test::gpu;

// Routing ids in [-1, E] (a few out of range on purpose) and random weights.
std::vector<int32_t> random_ids(size_t n, int E, uint32_t seed, bool with_bad) {
  std::mt19937 rng(seed);
  std::vector<int32_t> v(n);
  for (auto& x : v) x = with_bad ? int32_t(rng() % uint32_t(E + 2)) - 1 : int32_t(rng() % uint32_t(E));
  return v;
}

template <class T>
kc::Buffer<T> device_or_dummy(const std::vector<T>& h) {
  return h.empty() ? poisoned<T>(1) : to_device(h);
}

}  // namespace

TEST_CASE("column_sums_f64 sums each column in double as the CPU's loop does") {
  for (auto [M, N] : {std::pair{0, 4}, {1, 1}, {37, 4}, {1000, 8}, {4097, 33}, {129, 64}}) {
    CAPTURE(M);
    CAPTURE(N);
    std::vector<float> x = randn(size_t(M) * N, uint32_t(M * 7 + N), 0.3f);
    for (auto& v : x) v = std::fabs(v);  // probabilities are positive
    std::vector<double> ref(size_t(N), 0.0);
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) ref[size_t(n)] += x[size_t(m) * N + n];
    auto dx = device_or_dummy(x);
    auto out = poisoned<double>(size_t(N));
    SAL_CHECK_OK(kc::column_sums_f64(ctx(), dx.get(), M, N, out.get()));
    auto got = to_host(out);
    for (int n = 0; n < N; ++n) CHECK(std::fabs(got[size_t(n)] - ref[size_t(n)]) <= 1e-12 * (1.0 + ref[size_t(n)]));
  }
}

TEST_CASE("gate_dprobs adds each chosen expert's weight gradient to the aux term in the CPU's order") {
  for (auto [tokens, k, E] : {std::tuple{0, 2, 4}, {1, 1, 1}, {5, 2, 4}, {300, 2, 8}, {1031, 3, 5}, {64, 8, 16}}) {
    CAPTURE(tokens);
    CAPTURE(k);
    CAPTURE(E);
    std::vector<float> aux = randn(size_t(E), 3, 0.01f);
    std::vector<int32_t> idx = random_ids(size_t(tokens) * k, E, uint32_t(tokens + k), true);
    std::vector<float> dw = randn(size_t(tokens) * k, 5);
    // the CPU's loop (moe_gpt.cpp backward_gate), out-of-range ids skipped
    std::vector<float> ref(size_t(tokens) * E);
    for (int t = 0; t < tokens; ++t) {
      for (int e = 0; e < E; ++e) ref[size_t(t) * E + e] = aux[size_t(e)];
      for (int j = 0; j < k; ++j) {
        int32_t e = idx[size_t(t) * k + j];
        if (e >= 0 && e < E) ref[size_t(t) * E + e] += dw[size_t(t) * k + j];
      }
    }
    auto d_aux = to_device(aux);
    auto d_idx = device_or_dummy(idx);
    auto d_dw = device_or_dummy(dw);
    auto out = poisoned<float>(std::max<size_t>(1, ref.size()));
    SAL_CHECK_OK(kc::gate_dprobs(ctx(), d_aux.get(), d_idx.get(), d_dw.get(), tokens, k, E, out.get()));
    auto got = to_host(out);
    got.resize(ref.size());
    CHECK(got == ref);  // the same float additions in the same order: the same bits
  }
  // a bad k is refused
  auto b = poisoned<float>(4);
  auto i = poisoned<int32_t>(4);
  CHECK_FALSE(kc::gate_dprobs(ctx(), b.get(), i.get(), b.get(), 1, 17, 2, b.get()).ok());
}

TEST_CASE("gather_weights picks each assignment's gate probability") {
  for (auto [tokens, k, E] : {std::tuple{0, 2, 4}, {1, 1, 1}, {7, 2, 4}, {513, 2, 8}, {100, 4, 33}}) {
    CAPTURE(tokens);
    std::vector<float> probs = randn(size_t(tokens) * E, uint32_t(tokens * 3 + E));
    std::vector<int32_t> idx = random_ids(size_t(tokens) * k, E, uint32_t(tokens + 11), true);
    std::vector<float> ref(idx.size());
    for (size_t a = 0; a < idx.size(); ++a)
      ref[a] = idx[a] >= 0 && idx[a] < E ? probs[(a / size_t(k)) * E + size_t(idx[a])] : 0.0f;
    auto d_probs = device_or_dummy(probs);
    auto d_idx = device_or_dummy(idx);
    auto out = poisoned<float>(std::max<size_t>(1, ref.size()));
    SAL_CHECK_OK(kc::gather_weights(ctx(), d_probs.get(), d_idx.get(), tokens, k, E, out.get()));
    auto got = to_host(out);
    got.resize(ref.size());
    CHECK(got == ref);
  }
}

TEST_CASE("add sums elementwise, in place too") {
  for (size_t n : {size_t(0), size_t(1), size_t(255), size_t(257), size_t(100003)}) {
    CAPTURE(n);
    std::vector<float> a = randn(n, 1), b = randn(n, 2);
    std::vector<float> ref(n);
    for (size_t i = 0; i < n; ++i) ref[i] = a[i] + b[i];
    auto da = device_or_dummy(a), db = device_or_dummy(b);
    auto y = poisoned<float>(std::max<size_t>(1, n));
    SAL_CHECK_OK(kc::add(ctx(), da.get(), db.get(), y.get(), n));
    auto got = to_host(y);
    got.resize(n);
    CHECK(got == ref);
    SAL_CHECK_OK(kc::add(ctx(), da.get(), db.get(), da.get(), n));  // y aliases a
    auto got2 = to_host(da);
    got2.resize(n);
    CHECK(got2 == ref);
  }
}
