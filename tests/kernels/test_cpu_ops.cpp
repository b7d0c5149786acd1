// test_cpu_ops.cpp — the CPU operator kernels (kernels/cpu/ops.h) against naive double-precision
// references, and every backward against central finite differences of L = sum(w * f(x)) with w
// random. A gradient passes when ||numeric - analytic|| / ||numeric|| < kGradTol, and each check also
// confirms that the analytic gradient scaled by 1.01 would fail, so the tolerance is tight enough to
// catch a wrong factor. Last, determinism: the same inputs give the same bits with 1 and 3 threads.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/ops.h"

namespace k = sal::kernels::cpu;

namespace {

using Vec = std::vector<float>;

// Gradient tolerance (relative, 2-norm): float forwards and eps = 1e-2 give errors below ~1e-4 on
// these shapes; a gradient off by 1 % gives ~1e-2.
constexpr double kGradTol = 1e-3;
constexpr float kFdEps = 1e-2f;
constexpr double kWrongFactor = 1.01;

Vec randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  Vec v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * b[i];
  return s;
}

// Central differences of loss() with respect to every element of x (restored afterwards). The step
// actually taken is (x+eps) - (x-eps) as rounded to float.
std::vector<double> numeric_grad(Vec& x, const std::function<double()>& loss, float eps = kFdEps) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float x0 = x[i];
    const float xp = x0 + eps, xm = x0 - eps;
    x[i] = xp;
    const double lp = loss();
    x[i] = xm;
    const double lm = loss();
    x[i] = x0;
    g[i] = (lp - lm) / (double(xp) - double(xm));
  }
  return g;
}

double rel_error(const std::vector<double>& num, const Vec& ana, double factor = 1.0) {
  double diff = 0, ref = 0;
  for (size_t i = 0; i < num.size(); ++i) {
    const double d = num[i] - factor * ana[i];
    diff += d * d;
    ref += num[i] * num[i];
  }
  return std::sqrt(diff / std::max(ref, 1e-30));
}

void check_gradient(const char* what, const std::vector<double>& num, const Vec& ana) {
  REQUIRE(num.size() == ana.size());
  const double err = rel_error(num, ana), wrong = rel_error(num, ana, kWrongFactor);
  INFO(what << ": relative error " << err << ", with a 1% wrong gradient " << wrong);
  CHECK(err < kGradTol);
  CHECK(wrong > kGradTol);
}

double max_abs_diff(const Vec& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - b[i]));
  return m;
}

bool same_bits(const Vec& a, const Vec& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Naive references ----------------------------------------------------------------------------

std::vector<double> naive_gemm(bool ta, bool tb, int M, int N, int K, float alpha, const Vec& A, const Vec& B,
                               float beta, const Vec& C) {
  std::vector<double> out(size_t(M) * N);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double s = 0;
      for (int kk = 0; kk < K; ++kk) {
        const double a = ta ? A[size_t(kk) * M + m] : A[size_t(m) * K + kk];
        const double b = tb ? B[size_t(n) * K + kk] : B[size_t(kk) * N + n];
        s += a * b;
      }
      out[size_t(m) * N + n] = alpha * s + double(beta) * C[size_t(m) * N + n];
    }
  return out;
}

double gelu_ref(double x) {
  const double u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1.0 + std::tanh(u));
}

// out [B*T, C] of causal multi-head attention, softmax written out explicitly.
std::vector<double> naive_attention(const Vec& qkv, int B, int T, int C, int H) {
  const int hs = C / H;
  const double scale = 1.0 / std::sqrt(double(hs));
  std::vector<double> out(size_t(B) * T * C, 0.0);
  auto at = [&](int b, int t, int part, int h, int i) { return double(qkv[(size_t(b) * T + t) * 3 * C + part * C + h * hs + i]); };
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int t = 0; t < T; ++t) {
        std::vector<double> s(t + 1);
        double mx = -1e300;
        for (int j = 0; j <= t; ++j) {
          double d = 0;
          for (int i = 0; i < hs; ++i) d += at(b, t, 0, h, i) * at(b, j, 1, h, i);
          s[j] = d * scale;
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (auto& v : s) sum += (v = std::exp(v - mx));
        for (int j = 0; j <= t; ++j)
          for (int i = 0; i < hs; ++i) out[(size_t(b) * T + t) * C + h * hs + i] += s[j] / sum * at(b, j, 2, h, i);
      }
  return out;
}

}  // namespace

// GEMM ----------------------------------------------------------------------------------------

TEST_CASE("gemm matches a naive product for every transpose combination, alpha and beta") {
  const int M = 7, N = 5, K = 9;
  const Vec A = randn(size_t(M) * K, 1), B = randn(size_t(K) * N, 2), C0 = randn(size_t(M) * N, 3);
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      Vec C = C0;
      k::gemm(ta, tb, M, N, K, 0.75f, A.data(), B.data(), 0.5f, C.data());
      INFO("transA " << ta << " transB " << tb);
      CHECK(max_abs_diff(C, naive_gemm(ta, tb, M, N, K, 0.75f, A, B, 0.5f, C0)) < 1e-5);
    }
}

TEST_CASE("gemm with beta 0 ignores NaNs in C, and empty products are handled") {
  const int M = 3, N = 4, K = 2;
  const Vec A = randn(size_t(M) * K, 4), B = randn(size_t(K) * N, 5);
  Vec C(size_t(M) * N, std::numeric_limits<float>::quiet_NaN());
  k::gemm(false, false, M, N, K, 1.0f, A.data(), B.data(), 0.0f, C.data());
  CHECK(max_abs_diff(C, naive_gemm(false, false, M, N, K, 1.0f, A, B, 0.0f, Vec(C.size(), 0.0f))) < 1e-6);

  Vec D(size_t(M) * N, 2.0f);
  k::gemm(true, false, M, N, 0, 1.0f, nullptr, nullptr, 0.5f, D.data());  // K = 0: C = beta * C
  for (float d : D) CHECK(d == 1.0f);
  k::gemm(false, false, M, N, 0, 1.0f, nullptr, nullptr, 0.0f, D.data());
  for (float d : D) CHECK(d == 0.0f);
  k::gemm(false, false, 0, N, K, 1.0f, nullptr, B.data(), 0.0f, nullptr);  // M = 0: nothing
}

TEST_CASE("gemm_ld works on blocks inside larger matrices") {
  // A is columns [2, 5) of an [4, 8] matrix, C is columns [1, 4) of a [4, 6] matrix.
  const Vec big = randn(4 * 8, 6), B = randn(3 * 3, 7);
  Vec Cbig(4 * 6, 9.0f);
  k::gemm_ld(false, false, 4, 3, 3, 1.0f, big.data() + 2, 8, B.data(), 3, 0.0f, Cbig.data() + 1, 6);
  for (int m = 0; m < 4; ++m)
    for (int n = 0; n < 6; ++n) {
      if (n < 1 || n >= 4) {
        CHECK(Cbig[m * 6 + n] == 9.0f);
        continue;
      }
      double s = 0;
      for (int kk = 0; kk < 3; ++kk) s += double(big[m * 8 + 2 + kk]) * B[kk * 3 + (n - 1)];
      CHECK(std::fabs(Cbig[m * 6 + n] - s) < 1e-5);
    }
}

TEST_CASE("add_bias adds per column, bias_grad accumulates column sums") {
  const int M = 37, N = 70;
  const Vec y0 = randn(size_t(M) * N, 8), b = randn(N, 9), dy = randn(size_t(M) * N, 10);
  Vec y = y0;
  k::add_bias(y.data(), b.data(), M, N);
  Vec db(N, 1.5f);
  k::bias_grad(dy.data(), db.data(), M, N);
  for (int n = 0; n < N; ++n) {
    double s = 1.5;
    for (int m = 0; m < M; ++m) {
      CHECK(y[size_t(m) * N + n] == y0[size_t(m) * N + n] + b[n]);
      s += dy[size_t(m) * N + n];
    }
    CHECK(std::fabs(db[n] - s) < 1e-4);
  }
}

TEST_CASE("a linear layer's backward through gemm and bias_grad matches finite differences") {
  const int M = 4, K = 5, N = 3;
  Vec x = randn(size_t(M) * K, 11), W = randn(size_t(K) * N, 12), b = randn(N, 13);
  const Vec w = randn(size_t(M) * N, 14);
  auto loss = [&] {
    Vec y(size_t(M) * N);
    k::gemm(false, false, M, N, K, 1.0f, x.data(), W.data(), 0.0f, y.data());
    k::add_bias(y.data(), b.data(), M, N);
    return dot(w, y);
  };
  Vec dx(x.size()), dW(W.size(), 0.0f), db(N, 0.0f);
  k::gemm(false, true, M, K, N, 1.0f, w.data(), W.data(), 0.0f, dx.data());
  k::gemm(true, false, K, N, M, 1.0f, x.data(), w.data(), 1.0f, dW.data());
  k::bias_grad(w.data(), db.data(), M, N);
  check_gradient("dx", numeric_grad(x, loss), dx);
  check_gradient("dW", numeric_grad(W, loss), dW);
  check_gradient("db", numeric_grad(b, loss), db);
}

// GELU ----------------------------------------------------------------------------------------

TEST_CASE("gelu forward matches the tanh formula, including far tails") {
  Vec x = randn(1000, 15, 3.0f);
  for (float v : {0.0f, -0.0f, 1e-8f, 20.0f, -20.0f, 100.0f, -100.0f, 1e6f, -1e6f}) x.push_back(v);
  Vec y(x.size());
  k::gelu_forward(x.data(), y.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double r = gelu_ref(x[i]);
    INFO("x = " << x[i] << " got " << y[i] << " want " << r);
    CHECK(std::fabs(y[i] - r) <= 2e-6 * std::max(1.0, std::fabs(r)));
  }
}

TEST_CASE("gelu backward matches finite differences") {
  Vec x = randn(300, 16, 2.0f);
  const Vec w = randn(x.size(), 17);
  auto loss = [&] {
    Vec y(x.size());
    k::gelu_forward(x.data(), y.data(), x.size());
    return dot(w, y);
  };
  Vec dx(x.size());
  k::gelu_backward(x.data(), w.data(), dx.data(), x.size());
  check_gradient("gelu dx", numeric_grad(x, loss), dx);
}

// LayerNorm -----------------------------------------------------------------------------------

TEST_CASE("layernorm forward matches mean and biased variance per row") {
  const int M = 9, N = 37;
  const Vec x = randn(size_t(M) * N, 18, 2.0f), g = randn(N, 19), b = randn(N, 20);
  Vec y(x.size()), mean(M), rstd(M);
  k::layernorm_forward(x.data(), g.data(), b.data(), y.data(), mean.data(), rstd.data(), M, N);
  for (int m = 0; m < M; ++m) {
    double mu = 0, var = 0;
    for (int n = 0; n < N; ++n) mu += x[size_t(m) * N + n];
    mu /= N;
    for (int n = 0; n < N; ++n) var += (x[size_t(m) * N + n] - mu) * (x[size_t(m) * N + n] - mu);
    var /= N;
    const double rs = 1.0 / std::sqrt(var + 1e-5);
    CHECK(std::fabs(mean[m] - mu) < 1e-5);
    CHECK(std::fabs(rstd[m] - rs) < 1e-5 * rs);
    for (int n = 0; n < N; ++n) {
      const double want = (x[size_t(m) * N + n] - mu) * rs * g[n] + b[n];
      CHECK(std::fabs(y[size_t(m) * N + n] - want) < 1e-5 * std::max(1.0, std::fabs(want)));
    }
  }
}

TEST_CASE("layernorm backward matches finite differences for x, gamma and beta, and accumulates") {
  const int M = 3, N = 19;
  Vec x = randn(size_t(M) * N, 21), g = randn(N, 22), b = randn(N, 23);
  const Vec w = randn(x.size(), 24);
  auto loss = [&] {
    Vec y(x.size()), mean(M), rstd(M);
    k::layernorm_forward(x.data(), g.data(), b.data(), y.data(), mean.data(), rstd.data(), M, N);
    return dot(w, y);
  };
  Vec y(x.size()), mean(M), rstd(M), dx(x.size()), dg(N, 0.25f), db(N, -0.5f);
  k::layernorm_forward(x.data(), g.data(), b.data(), y.data(), mean.data(), rstd.data(), M, N);
  k::layernorm_backward(w.data(), x.data(), g.data(), mean.data(), rstd.data(), dx.data(), dg.data(), db.data(),
                        M, N);
  for (auto& v : dg) v -= 0.25f;  // the prior contents stay: accumulation
  for (auto& v : db) v += 0.5f;
  check_gradient("layernorm dx", numeric_grad(x, loss), dx);
  check_gradient("layernorm dgamma", numeric_grad(g, loss), dg);
  check_gradient("layernorm dbeta", numeric_grad(b, loss), db);

  Vec dx_frozen(x.size());  // frozen operator: no parameter gradients, same input gradient
  k::layernorm_backward(w.data(), x.data(), g.data(), mean.data(), rstd.data(), dx_frozen.data(), nullptr,
                        nullptr, M, N);
  CHECK(same_bits(dx, dx_frozen));
}

// Softmax and top-k ---------------------------------------------------------------------------

TEST_CASE("softmax forward matches exp / sum, stays finite for large inputs") {
  const int M = 6, N = 33;
  Vec x = randn(size_t(M) * N, 25, 3.0f);
  for (int n = 0; n < N; ++n) x[size_t(5) * N + n] = 1000.0f + float(n % 3);  // overflow without max-subtraction
  Vec y(x.size());
  k::softmax_forward(x.data(), y.data(), M, N);
  for (int m = 0; m < M; ++m) {
    double mx = -1e300, sum = 0;
    for (int n = 0; n < N; ++n) mx = std::max(mx, double(x[size_t(m) * N + n]));
    for (int n = 0; n < N; ++n) sum += std::exp(x[size_t(m) * N + n] - mx);
    for (int n = 0; n < N; ++n) {
      const double want = std::exp(x[size_t(m) * N + n] - mx) / sum;
      CHECK(std::fabs(y[size_t(m) * N + n] - want) < 1e-6);
    }
  }
}

TEST_CASE("softmax backward matches finite differences") {
  const int M = 4, N = 8;
  Vec x = randn(size_t(M) * N, 26, 2.0f);
  const Vec w = randn(x.size(), 27);
  auto loss = [&] {
    Vec y(x.size());
    k::softmax_forward(x.data(), y.data(), M, N);
    return dot(w, y);
  };
  Vec y(x.size()), dx(x.size());
  k::softmax_forward(x.data(), y.data(), M, N);
  k::softmax_backward(y.data(), w.data(), dx.data(), M, N);
  check_gradient("softmax dx", numeric_grad(x, loss), dx);
}

TEST_CASE("topk returns the largest first, ties by lower index, NaNs last") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Vec x = {1, 3, 3, 2, 3,  /**/ 5, 4, 3, 2, 1,  /**/ nan, 0, nan, -1, 0};
  std::vector<int32_t> idx(9);
  Vec val(9);
  k::topk(x.data(), 3, 5, 3, idx.data(), val.data());
  CHECK(idx == std::vector<int32_t>{1, 2, 4, 0, 1, 2, 1, 4, 3});
  CHECK(val[0] == 3.0f);
  CHECK(val[5] == 3.0f);
  CHECK(val[8] == -1.0f);

  std::vector<int32_t> all(5);
  Vec allv(5);
  k::topk(x.data(), 1, 5, 5, all.data(), allv.data());
  CHECK(all == std::vector<int32_t>{1, 2, 4, 3, 0});
  k::topk(x.data() + 5, 1, 5, 1, all.data(), allv.data());
  CHECK(all[0] == 0);
  CHECK(allv[0] == 5.0f);
}

// Attention -----------------------------------------------------------------------------------

TEST_CASE("attention forward matches a naive causal attention, across causal blocks") {
  struct Shape { int B, T, C, H; };
  for (Shape s : {Shape{2, 5, 8, 2}, Shape{1, 70, 12, 3}, Shape{2, 2 * k::kCausalBlock + 3, 8, 1}}) {
    const Vec qkv = randn(size_t(s.B) * s.T * 3 * s.C, 28, 1.5f);
    Vec out(size_t(s.B) * s.T * s.C), probs(size_t(s.B) * s.H * s.T * s.T, -1.0f);
    k::attention_forward(qkv.data(), out.data(), probs.data(), s.B, s.T, s.C, s.H);
    INFO("B " << s.B << " T " << s.T << " C " << s.C << " H " << s.H);
    CHECK(max_abs_diff(out, naive_attention(qkv, s.B, s.T, s.C, s.H)) < 1e-5);
    bool causal = true, normalised = true;
    for (size_t bh = 0; bh < size_t(s.B) * s.H; ++bh)
      for (int t = 0; t < s.T; ++t) {
        double sum = 0;
        for (int j = 0; j < s.T; ++j) {
          const float p = probs[(bh * s.T + t) * s.T + j];
          if (j > t && p != 0.0f) causal = false;
          sum += p;
        }
        if (std::fabs(sum - 1.0) > 1e-5) normalised = false;
      }
    CHECK(causal);
    CHECK(normalised);
  }
}

TEST_CASE("attention backward matches finite differences for q, k and v") {
  struct Shape { int B, T, C, H; };
  for (Shape s : {Shape{2, 5, 8, 2}, Shape{1, k::kCausalBlock + 6, 4, 1}}) {
    Vec qkv = randn(size_t(s.B) * s.T * 3 * s.C, 29);
    const Vec w = randn(size_t(s.B) * s.T * s.C, 30);
    Vec out(w.size()), probs(size_t(s.B) * s.H * s.T * s.T);
    auto loss = [&] {
      k::attention_forward(qkv.data(), out.data(), probs.data(), s.B, s.T, s.C, s.H);
      return dot(w, out);
    };
    loss();
    Vec dqkv(qkv.size(), std::numeric_limits<float>::quiet_NaN());  // every element must be written
    k::attention_backward(w.data(), qkv.data(), probs.data(), dqkv.data(), s.B, s.T, s.C, s.H);
    INFO("B " << s.B << " T " << s.T << " C " << s.C << " H " << s.H);
    check_gradient("attention dqkv", numeric_grad(qkv, loss), dqkv);
  }
}

// Embeddings ----------------------------------------------------------------------------------

TEST_CASE("embedding forward adds token and position rows, backward accumulates, repeated ids too") {
  const int B = 2, T = 3, C = 5, V = 4;
  const std::vector<int32_t> ids = {1, 3, 1, 0, 1, 2};
  Vec tok = randn(size_t(V) * C, 31), pos = randn(size_t(T) * C, 32);
  const Vec w = randn(size_t(B) * T * C, 33);
  Vec out(size_t(B) * T * C);
  k::embedding_forward(ids.data(), tok.data(), pos.data(), out.data(), B, T, C, V);
  for (int r = 0; r < B * T; ++r)
    for (int c = 0; c < C; ++c) CHECK(out[size_t(r) * C + c] == tok[size_t(ids[r]) * C + c] + pos[size_t(r % T) * C + c]);

  auto loss = [&] {
    k::embedding_forward(ids.data(), tok.data(), pos.data(), out.data(), B, T, C);
    return dot(w, out);
  };
  Vec dtok(tok.size(), 1.0f), dpos(pos.size(), 2.0f);
  k::embedding_backward(ids.data(), w.data(), dtok.data(), dpos.data(), B, T, C);
  for (auto& v : dtok) v -= 1.0f;
  for (auto& v : dpos) v -= 2.0f;
  check_gradient("embedding dtok", numeric_grad(tok, loss), dtok);
  check_gradient("embedding dpos", numeric_grad(pos, loss), dpos);
}

// Cross-entropy -------------------------------------------------------------------------------

TEST_CASE("cross-entropy loss matches log-sum-exp and skips ignored rows") {
  const int M = 5, V = 40;
  const Vec logits = randn(size_t(M) * V, 34, 4.0f);
  const std::vector<int32_t> targets = {3, -1, 39, 0, -100};
  Vec probs(logits.size());
  const double got = k::cross_entropy_forward(logits.data(), targets.data(), probs.data(), M, V);
  double want = 0;
  for (int m = 0; m < M; ++m) {
    double mx = -1e300, sum = 0;
    for (int v = 0; v < V; ++v) mx = std::max(mx, double(logits[size_t(m) * V + v]));
    for (int v = 0; v < V; ++v) sum += std::exp(logits[size_t(m) * V + v] - mx);
    for (int v = 0; v < V; ++v)
      CHECK(std::fabs(probs[size_t(m) * V + v] - std::exp(logits[size_t(m) * V + v] - mx) / sum) < 1e-6);
    if (targets[m] >= 0) want += mx + std::log(sum) - logits[size_t(m) * V + targets[m]];
  }
  CHECK(std::fabs(got - want) < 1e-5 * want);
}

TEST_CASE("cross-entropy backward matches finite differences, zero rows where ignored") {
  const int M = 4, V = 7;
  const float scale = 0.25f;
  Vec logits = randn(size_t(M) * V, 35, 2.0f);
  const std::vector<int32_t> targets = {2, -1, 6, 0};
  Vec probs(logits.size());
  auto loss = [&] { return scale * k::cross_entropy_forward(logits.data(), targets.data(), probs.data(), M, V); };
  loss();
  Vec dlogits(logits.size(), 7.0f);
  k::cross_entropy_backward(probs.data(), targets.data(), dlogits.data(), M, V, scale);
  for (int v = 0; v < V; ++v) CHECK(dlogits[size_t(1) * V + v] == 0.0f);
  check_gradient("cross-entropy dlogits", numeric_grad(logits, loss), dlogits);
}

// Optimizer -----------------------------------------------------------------------------------

TEST_CASE("adamw takes the hand-computed steps") {
  // Step 1 from m = v = 0: mhat = g, vhat = g^2, so the update is lr * (sign(g) + wd * p) up to eps.
  float p = 1.0f, m = 0.0f, v = 0.0f;
  const float g1 = 0.5f, lr = 0.1f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 0.01f;
  k::adamw(&p, &g1, &m, &v, 1, lr, b1, b2, eps, wd, 1);
  CHECK(m == doctest::Approx(0.05).epsilon(1e-6));
  CHECK(v == doctest::Approx(0.00025).epsilon(1e-6));
  CHECK(p == doctest::Approx(1.0 - 0.1 * (1.0 + 0.01)).epsilon(1e-6));
  // Step 2, g = -0.25: m = 0.045 - 0.025 = 0.02, v = 0.00024975 + 0.0000625 = 0.00031225.
  const float g2 = -0.25f, p1 = p;
  k::adamw(&p, &g2, &m, &v, 1, lr, b1, b2, eps, wd, 2);
  const double mhat = 0.02 / (1 - 0.81), vhat = 0.00031225 / (1 - 0.998001);
  CHECK(m == doctest::Approx(0.02).epsilon(1e-5));
  CHECK(v == doctest::Approx(0.00031225).epsilon(1e-5));
  CHECK(p == doctest::Approx(p1 - 0.1 * (mhat / (std::sqrt(vhat) + 1e-8) + 0.01 * p1)).epsilon(1e-5));
}

TEST_CASE("adamw on a long vector equals the scalar step element by element") {
  const size_t n = 3 * k::kOptimChunk + 17;
  Vec p = randn(n, 36), g = randn(n, 37), m = randn(n, 38, 0.1f), v = randn(n, 39, 0.1f);
  for (auto& x : v) x = x * x;
  Vec p0 = p, m0 = m, v0 = v;
  k::adamw(p.data(), g.data(), m.data(), v.data(), n, 3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 7);
  double worst = 0;
  for (size_t i = 0; i < n; ++i) {
    const double mi = 0.9 * m0[i] + 0.1 * g[i], vi = 0.95 * v0[i] + 0.05 * double(g[i]) * g[i];
    const double mh = mi / (1 - std::pow(0.9, 7)), vh = vi / (1 - std::pow(0.95, 7));
    const double want = p0[i] - 3e-3 * (mh / (std::sqrt(vh) + 1e-8) + 0.1 * p0[i]);
    worst = std::max(worst, std::fabs(p[i] - want));
  }
  CHECK(worst < 1e-5);
}

TEST_CASE("sum_squares in double, and scale") {
  const size_t n = 2 * k::kOptimChunk + 5;
  Vec x = randn(n, 40);
  double want = 0;
  for (float v : x) want += double(v) * v;
  CHECK(k::sum_squares(x.data(), n) == doctest::Approx(want).epsilon(1e-12));
  CHECK(k::sum_squares(x.data(), 0) == 0.0);
  const Vec x0 = x;
  k::scale(x.data(), n, -0.5f);
  for (size_t i = 0; i < n; ++i) CHECK(x[i] == -0.5f * x0[i]);
}

// Threads and determinism ---------------------------------------------------------------------

TEST_CASE("the kernel pool runs every index exactly once, job after job, nested calls inline") {
  const int before = k::num_threads();
  k::set_threads(3);
  std::vector<int> hits(1000);
  for (int job = 0; job < 2000; ++job) {
    const size_t count = 1 + size_t(job) % hits.size();
    k::detail::parallel_for(count, 1 + size_t(job) % 7, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) ++hits[i];
      k::detail::parallel_for(2, 1, [](size_t, size_t) {});  // nested: runs on this thread
    });
    bool once = true;
    for (size_t i = 0; i < hits.size(); ++i) once = once && hits[i] == (i < count ? 1 : 0);
    REQUIRE(once);
    std::fill(hits.begin(), hits.end(), 0);
  }
  k::set_threads(before);
}


TEST_CASE("results are bit-identical with 1 and 3 threads") {
  const int B = 2, T = 2 * k::kCausalBlock + 5, C = 32, H = 2, M = B * T, V = 256;
  const Vec qkv = randn(size_t(M) * 3 * C, 41), dout = randn(size_t(M) * C, 42);
  const Vec x = randn(size_t(M) * C, 43), g = randn(C, 44), b = randn(C, 45);
  const Vec logits = randn(size_t(M) * V, 46, 3.0f);
  std::vector<int32_t> targets(M), ids(M);
  for (int i = 0; i < M; ++i) targets[i] = ids[i] = (i * 37) % V - (i % 11 == 0 ? V : 0);
  for (auto& id : ids) id = id < 0 ? 0 : id;
  const Vec big = randn(5 * k::kOptimChunk + 3, 47);
  const int gm = 600, gn = 300, gk = 200;  // big enough to be cut into tiles
  const Vec ga = randn(size_t(gm) * gk, 48), gb = randn(size_t(gk) * gn, 49);

  struct Outputs {
    Vec att, probs, dqkv, y, dx, dg, db, ce, dtok, dpos, gemm;
    double loss = 0, ss = 0;
  };
  auto run = [&](int threads) {
    k::set_threads(threads);
    Outputs o;
    o.att.resize(size_t(M) * C);
    o.probs.resize(size_t(B) * H * T * T);
    o.dqkv.resize(qkv.size());
    k::attention_forward(qkv.data(), o.att.data(), o.probs.data(), B, T, C, H);
    k::attention_backward(dout.data(), qkv.data(), o.probs.data(), o.dqkv.data(), B, T, C, H);
    Vec mean(M), rstd(M);
    o.y.resize(x.size()), o.dx.resize(x.size()), o.dg.assign(C, 0.0f), o.db.assign(C, 0.0f);
    k::layernorm_forward(x.data(), g.data(), b.data(), o.y.data(), mean.data(), rstd.data(), M, C);
    k::layernorm_backward(dout.data(), x.data(), g.data(), mean.data(), rstd.data(), o.dx.data(), o.dg.data(),
                          o.db.data(), M, C);
    o.ce.resize(logits.size());
    o.loss = k::cross_entropy_forward(logits.data(), targets.data(), o.ce.data(), M, V);
    o.dtok.assign(size_t(V) * C, 0.0f), o.dpos.assign(size_t(T) * C, 0.0f);
    k::embedding_backward(ids.data(), dout.data(), o.dtok.data(), o.dpos.data(), B, T, C);
    o.ss = k::sum_squares(big.data(), big.size());
    o.gemm.resize(size_t(gm) * gn);
    k::gemm(false, false, gm, gn, gk, 1.0f, ga.data(), gb.data(), 0.0f, o.gemm.data());
    return o;
  };
  const int before = k::num_threads();
  const Outputs one = run(1), three = run(3);
  k::set_threads(before);
  CHECK(same_bits(one.att, three.att));
  CHECK(same_bits(one.probs, three.probs));
  CHECK(same_bits(one.dqkv, three.dqkv));
  CHECK(same_bits(one.y, three.y));
  CHECK(same_bits(one.dx, three.dx));
  CHECK(same_bits(one.dg, three.dg));
  CHECK(same_bits(one.db, three.db));
  CHECK(same_bits(one.ce, three.ce));
  CHECK(same_bits(one.dtok, three.dtok));
  CHECK(same_bits(one.dpos, three.dpos));
  CHECK(same_bits(one.gemm, three.gemm));
  CHECK(one.loss == three.loss);
  CHECK(one.ss == three.ss);
}
