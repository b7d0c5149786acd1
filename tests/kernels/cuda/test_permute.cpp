// test_permute.cpp — the GPU token permute / un-permute / combine (kernels/cuda/permute.h) against
// the CPU path's semantics. The reference rows are packed exactly as DistributedExchange::send_rows
// packs them (destination by destination, expert by expert, each expert's slots in order) from the
// CPU schedule (sal::runtime::flexible_dispatch); the reference combine and its backward are the
// MoE layer's loops in model/moe_gpt.cpp (kernels/cpu axpy over slots, dot products in double),
// with the exchange's return_rows putting each row back into its slot. Outputs are poisoned first.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/cpu/blas1.h"
#include "kernels/cpu/softmax.h"
#include "kernels/cuda/dispatch.h"
#include "kernels/cuda/permute.h"
#include "runtime/dispatch.h"

namespace {

using namespace sal::test::gpu;
namespace rt = sal::runtime;
namespace cpu = sal::kernels::cpu;

enum class Routing { kRandom, kOneExpert, kSkewed, kHalfExperts, kGate };

// One rank's view of an MoE layer: its routing, the schedule every rank computes, and the
// reference send-buffer row of each assignment.
struct Scenario {
  int tokens = 0, k = 1, experts = 1, workers = 1, rank = 0;
  std::vector<int32_t> idx;   // [tokens * k]
  std::vector<float> w;       // [tokens * k] combine weights
  rt::DispatchSchedule sched;
  std::vector<uint32_t> T, R;  // the tokens and units the schedule came from, [E][W] flattened
  std::vector<uint32_t> send; // [E][W][W], flattened
  std::vector<int32_t> rows;  // [tokens * k], reference
  int n() const { return tokens * k; }
};

// What send_rows in runtime/distributed_exchange.cpp does, recording the row of each slot instead of copying.
// Slots beyond the schedule get -1; rows the schedule reserves beyond tokens*k are not handed out.
std::vector<int32_t> reference_rows(const Scenario& s) {
  std::vector<std::vector<int>> slots(size_t(s.experts));
  for (int slot = 0; slot < s.n(); ++slot) {
    int32_t e = s.idx[size_t(slot)];
    if (e >= 0 && e < s.experts) slots[size_t(e)].push_back(slot);
  }
  std::vector<int32_t> rows(size_t(s.n()), -1);
  std::vector<size_t> next(size_t(s.experts), 0);
  int64_t row = 0;
  for (int i = 0; i < s.workers; ++i)
    for (int e = 0; e < s.experts; ++e)
      for (uint32_t r = 0; r < s.send[(size_t(e) * s.workers + s.rank) * s.workers + i]; ++r, ++row) {
        size_t at = next[size_t(e)]++;
        if (at < slots[size_t(e)].size() && row < s.n()) rows[size_t(slots[size_t(e)][at])] = int32_t(row);
      }
  return rows;
}

std::vector<uint32_t> local_counts(const Scenario& s) {
  std::vector<uint32_t> c(size_t(s.experts), 0);
  for (int32_t e : s.idx)
    if (e >= 0 && e < s.experts) ++c[size_t(e)];
  return c;
}

// Builds the routing, the other ranks' counts and the replica units, and the CPU schedule.
// zero_quota_here: even experts have no unit on this rank (all their tokens leave).
// count_delta: added to this rank's count of expert 0 in the schedule (a schedule that does not
// match the ids; 0 normally).
Scenario make_scenario(uint32_t seed, int tokens, int k, int experts, int workers, int rank, Routing routing,
                       bool zero_quota_here = false, int count_delta = 0) {
  std::mt19937 rng(seed);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Scenario s;
  s.tokens = tokens, s.k = k, s.experts = experts, s.workers = workers, s.rank = rank;
  s.idx.resize(size_t(s.n()));
  s.w.resize(size_t(s.n()));
  if (routing == Routing::kGate) {
    // The CPU gate: softmax of random logits, then top-k (its weights become the combine weights).
    std::vector<float> logits = randn(size_t(tokens) * experts, seed + 1, 2.0f), probs(logits.size());
    cpu::softmax_forward(logits.data(), probs.data(), tokens, experts);
    cpu::topk(probs.data(), tokens, experts, k, s.idx.data(), s.w.data());
  } else {
    for (int t = 0; t < tokens; ++t)
      for (int j = 0; j < k; ++j) {
        int e = 0;
        for (;;) {  // k distinct experts per token, like top-k
          switch (routing) {
            case Routing::kRandom: e = uni(0, experts - 1); break;
            case Routing::kOneExpert: e = j == 0 ? experts / 2 : uni(0, experts - 1); break;
            case Routing::kSkewed: e = uni(0, 9) < 7 ? uni(0, std::min(1, experts - 1)) : uni(0, experts - 1); break;
            case Routing::kHalfExperts: e = uni(0, std::max(0, experts / 2 - 1)); break;
            case Routing::kGate: break;
          }
          bool taken = false;
          for (int jj = 0; jj < j; ++jj) taken = taken || s.idx[size_t(t) * k + jj] == e;
          if (!taken) break;
        }
        s.idx[size_t(t) * k + j] = e;
        s.w[size_t(t) * k + j] = float(uni(1, 1000)) / 1000.0f;
      }
  }
  // Token counts (this rank's column from the ids) and units.
  rt::Counts T(size_t(experts), std::vector<uint32_t>(size_t(workers), 0)), R = T;
  std::vector<uint32_t> mine = local_counts(s);
  for (int e = 0; e < experts; ++e) {
    uint64_t total = 0, units = 0;
    for (int j = 0; j < workers; ++j) {
      T[size_t(e)][size_t(j)] = j == rank ? mine[size_t(e)] : uint32_t(uni(0, std::max(1, 2 * s.n() / experts)));
      R[size_t(e)][size_t(j)] = uint32_t(uni(0, 2));
      if (zero_quota_here && j == rank && e % 2 == 0) R[size_t(e)][size_t(j)] = 0;
      total += T[size_t(e)][size_t(j)];
      units += R[size_t(e)][size_t(j)];
    }
    if (total > 0 && units == 0) {
      int j = zero_quota_here && e % 2 == 0 && workers > 1 ? (rank + 1) % workers : uni(0, workers - 1);
      R[size_t(e)][size_t(j)] = 1;
    }
  }
  T[0][size_t(rank)] = uint32_t(int64_t(T[0][size_t(rank)]) + count_delta);
  for (int e = 0; e < experts; ++e)
    for (int j = 0; j < workers; ++j) {
      s.T.push_back(T[size_t(e)][size_t(j)]);
      s.R.push_back(R[size_t(e)][size_t(j)]);
    }
  auto sched = rt::flexible_dispatch(T, R);
  REQUIRE_MESSAGE(sched.ok(), (sched.ok() ? "" : sched.error().message()));
  s.sched = std::move(*sched);
  for (int e = 0; e < experts; ++e)
    for (int j = 0; j < workers; ++j)
      for (int i = 0; i < workers; ++i) s.send.push_back(s.sched.sent(e, j, i));
  s.rows = reference_rows(s);
  return s;
}

// rows from the GPU for the scenario's ids and schedule.
std::vector<int32_t> gpu_rows(const Scenario& s) {
  auto idx = to_device(s.idx);
  auto send = to_device(s.send);
  auto rows = poisoned<int32_t>(size_t(s.n()));
  kc::Buffer<uint8_t> ws;
  SAL_CHECK_OK(ws.allocate(kc::permute_workspace_bytes(s.tokens, s.k, s.experts, s.workers)));
  SAL_CHECK_OK(kc::permute_rows(ctx(), idx.get(), s.tokens, s.k, send.get(), s.experts, s.workers, s.rank, rows.get(),
                                ws.get(), ws.size()));
  return to_host(rows);
}

size_t row_mismatches(const std::vector<int32_t>& got, const std::vector<int32_t>& want) {
  if (got.size() != want.size()) return want.size() + 1;
  size_t bad = 0;
  for (size_t a = 0; a < want.size(); ++a)
    if (got[a] != want[a]) {
      if (bad == 0) FAIL_CHECK("rows[" << a << "] = " << got[a] << ", reference " << want[a]);
      ++bad;
    }
  return bad;
}

bool is_permutation_of_all_rows(const std::vector<int32_t>& rows) {
  std::vector<int32_t> sorted(rows);
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i)
    if (sorted[i] != int32_t(i)) return false;
  return true;
}

// bf16 bits of x, rounded to nearest even (finite x).
uint16_t bf16_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

// ---- references from the CPU path --------------------------------------------------------------

// The send buffer: slot a's row holds x[a / k] (runtime/distributed_exchange.cpp forward + send_rows).
std::vector<float> ref_permute(const Scenario& s, const std::vector<float>& x, int d, float fill) {
  std::vector<float> buf(size_t(s.n()) * d, fill);
  for (int a = 0; a < s.n(); ++a)
    if (s.rows[size_t(a)] >= 0)
      std::copy(x.begin() + long(a / s.k) * d, x.begin() + long(a / s.k + 1) * d,
                buf.begin() + long(s.rows[size_t(a)]) * d);
  return buf;
}

// The exchange's return_rows: each slot gets its row of y back (absent rows: zeros).
std::vector<float> by_slot(const Scenario& s, const std::vector<float>& y, int d) {
  std::vector<float> out(size_t(s.n()) * d, 0.0f);
  for (int a = 0; a < s.n(); ++a)
    if (s.rows[size_t(a)] >= 0)
      std::copy(y.begin() + long(s.rows[size_t(a)]) * d, y.begin() + long(s.rows[size_t(a)] + 1) * d,
                out.begin() + long(a) * d);
  return out;
}

// model/moe_gpt.cpp forward_layer's combine (without the residual): axpy over j in order.
std::vector<float> ref_combine(const Scenario& s, const std::vector<float>& y, int d) {
  std::vector<float> slot = by_slot(s, y, d), out(size_t(s.tokens) * d, 0.0f);
  for (int t = 0; t < s.tokens; ++t)
    for (int j = 0; j < s.k; ++j) {
      size_t a = size_t(t) * s.k + j;
      if (s.rows[a] >= 0) cpu::axpy(size_t(d), s.w[a], &slot[a * d], &out[size_t(t) * d]);
    }
  return out;
}

// model/moe_gpt.cpp backward_layer: dw = dot(dres, out) in double; d_out = w * dres, which the
// exchange sends in send-buffer layout (rows no assignment names keep `fill`).
void ref_combine_backward(const Scenario& s, const std::vector<float>& dres, const std::vector<float>& y, int d,
                          float fill, std::vector<float>& d_rows, std::vector<float>& dw) {
  std::vector<float> slot = by_slot(s, y, d);
  d_rows.assign(size_t(s.n()) * d, fill);
  dw.assign(size_t(s.n()), 0.0f);
  for (int t = 0; t < s.tokens; ++t)
    for (int j = 0; j < s.k; ++j) {
      size_t a = size_t(t) * s.k + j;
      if (s.rows[a] < 0) continue;
      const float* o = &slot[a * d];
      const float* dy = &dres[size_t(t) * d];
      double dot = 0;
      for (int i = 0; i < d; ++i) dot += double(dy[i]) * o[i];
      dw[a] = float(dot);
      for (int i = 0; i < d; ++i) d_rows[size_t(s.rows[a]) * d + i] = s.w[a] * dy[i];
    }
}

// model/moe_gpt.cpp backward_layer: dh2[t] = sum_j dx_assign[t*k + j] (axpy with 1, in order).
std::vector<float> ref_permute_backward(const Scenario& s, const std::vector<float>& d_send, int d) {
  std::vector<float> slot = by_slot(s, d_send, d), dx(size_t(s.tokens) * d, 0.0f);
  for (int t = 0; t < s.tokens; ++t)
    for (int j = 0; j < s.k; ++j) {
      size_t a = size_t(t) * s.k + j;
      if (s.rows[a] >= 0) cpu::axpy(size_t(d), 1.0f, &slot[a * d], &dx[size_t(t) * d]);
    }
  return dx;
}

// Runs every data kernel on the scenario's reference rows and compares with the references.
// x_offset shifts x and y by that many floats inside their buffers (to reach the unaligned path).
void check_data_kernels(const Scenario& s, int d, uint32_t seed, int x_offset = 0) {
  CAPTURE(s.tokens);
  CAPTURE(s.k);
  CAPTURE(d);
  CAPTURE(x_offset);
  const int n = s.n();
  std::vector<float> x = randn(size_t(s.tokens) * d + x_offset, seed);
  std::vector<float> y = randn(size_t(n) * d + x_offset, seed + 1);
  std::vector<float> g = randn(size_t(s.tokens) * d, seed + 2);
  std::vector<float> x_plain(x.begin() + x_offset, x.end()), y_plain(y.begin() + x_offset, y.end());
  auto dx_ = to_device(x), dy_ = to_device(y), dg = to_device(g), dw_ = to_device(s.w);
  auto drows = to_device(s.rows);
  const float* xp = dx_.get() + x_offset;
  const float* yp = dy_.get() + x_offset;
  std::vector<char> named(size_t(n), 0);  // rows some assignment names
  for (int32_t r : s.rows)
    if (r >= 0) named[size_t(r)] = 1;

  // permute, fp32 and bf16: exact copies (rows no assignment names stay poisoned).
  {
    auto buf = poisoned<float>(size_t(n) * d);
    SAL_CHECK_OK(kc::permute(ctx(), xp, drows.get(), s.tokens, s.k, d, buf.get()));
    auto got = to_host(buf);
    auto want = ref_permute(s, x_plain, d, 0.0f);
    size_t bad = 0;
    for (int r = 0; r < n; ++r) {
      if (!named[size_t(r)]) continue;
      if (std::memcmp(&got[size_t(r) * d], &want[size_t(r) * d], size_t(d) * sizeof(float)) != 0) ++bad;
    }
    CHECK(bad == 0);
    auto buf16 = poisoned<kc::Bf16>(size_t(n) * d);
    SAL_CHECK_OK(kc::permute(ctx(), xp, drows.get(), s.tokens, s.k, d, buf16.get()));
    auto got16 = to_host(buf16);
    size_t bad16 = 0;
    for (int a = 0; a < n; ++a) {
      int32_t r = s.rows[size_t(a)];
      if (r < 0) continue;
      for (int i = 0; i < d; ++i) {
        uint16_t bits;
        std::memcpy(&bits, &got16[size_t(r) * d + i], 2);
        bad16 += bits != bf16_bits(x_plain[size_t(a / s.k) * d + i]);
      }
    }
    CHECK(bad16 == 0);
  }
  // unpermute + combine.
  {
    auto out = poisoned<float>(size_t(s.tokens) * d);
    SAL_CHECK_OK(kc::unpermute_combine(ctx(), yp, drows.get(), dw_.get(), s.tokens, s.k, d, out.get()));
    auto got = to_host(out), want = ref_combine(s, y_plain, d);
    CHECK(rel_error(got, want) < kFp32Tol);
    CHECK(worst_error(got, want) < 1e-3);  // |error| <= ~1e-6 where the sum cancels to ~0
  }
  // combine backward.
  {
    const float kFill = -7.0f;
    std::vector<float> fill(size_t(n) * d, kFill);
    auto d_rows = to_device(fill);
    auto d_w = poisoned<float>(size_t(n));
    SAL_CHECK_OK(kc::unpermute_combine_backward(ctx(), dg.get(), yp, drows.get(), dw_.get(), s.tokens, s.k, d,
                                                d_rows.get(), d_w.get()));
    std::vector<float> want_rows, want_dw;
    ref_combine_backward(s, g, y_plain, d, kFill, want_rows, want_dw);
    auto got_rows = to_host(d_rows), got_dw = to_host(d_w);
    CHECK(got_rows == want_rows);  // one product each: exact
    CHECK(rel_error(got_dw, want_dw) < kFp32Tol);
    CHECK(worst_error(got_dw, want_dw, 1.0) < 1e-4);  // fp32 vs double dot: ~1e-5 absolute at d = 4096
  }
  // permute backward.
  {
    auto dx = poisoned<float>(size_t(s.tokens) * d);
    SAL_CHECK_OK(kc::permute_backward(ctx(), yp, drows.get(), s.tokens, s.k, d, dx.get()));
    auto got = to_host(dx), want = ref_permute_backward(s, y_plain, d);
    CHECK(rel_error(got, want) < kFp32Tol);
    CHECK(worst_error(got, want) < 1e-3);
  }
}

}  // namespace

TEST_CASE("cuda permute_rows packs like the exchange: destination, expert, slot order") {
  struct Shape {
    int tokens, k, experts, workers, rank;
    Routing routing;
    bool zero_quota_here;
  };
  const Shape shapes[] = {
      {1, 1, 1, 1, 0, Routing::kRandom, false},        // M = 1
      {1, 2, 4, 3, 1, Routing::kRandom, false},
      {7, 1, 3, 1, 0, Routing::kOneExpert, false},     // one worker: everything kept
      {100, 1, 1, 4, 2, Routing::kRandom, false},      // all tokens to the one expert
      {64, 1, 8, 4, 3, Routing::kOneExpert, false},    // k = 1: all tokens to one expert
      {333, 2, 8, 4, 0, Routing::kSkewed, false},
      {333, 2, 8, 4, 3, Routing::kSkewed, true},       // even experts: zero quota on this rank
      {500, 4, 16, 8, 5, Routing::kHalfExperts, false},  // experts with no local tokens
      {1000, 8, 64, 16, 7, Routing::kRandom, true},
      {2049, 2, 12, 5, 4, Routing::kGate, false},      // the CPU gate's top-2
      {4096, 2, 256, 3, 1, Routing::kRandom, false},   // many experts, chunks of 512 assignments
      {777, 3, 5, 130, 64, Routing::kRandom, false},   // many workers
      {65536, 2, 16, 8, 2, Routing::kSkewed, false},   // M = 64K
      {8192, 8, 256, 8, 6, Routing::kGate, true},      // k = 8, 256 experts, 64K assignments
  };
  uint32_t seed = 100;
  for (const Shape& sh : shapes) {
    CAPTURE(sh.tokens);
    CAPTURE(sh.k);
    CAPTURE(sh.experts);
    CAPTURE(sh.workers);
    CAPTURE(sh.rank);
    Scenario s = make_scenario(++seed, sh.tokens, sh.k, sh.experts, sh.workers, sh.rank, sh.routing,
                               sh.zero_quota_here);
    REQUIRE(is_permutation_of_all_rows(s.rows));  // the reference itself: a consistent schedule
    CHECK(row_mismatches(gpu_rows(s), s.rows) == 0);
  }
}

TEST_CASE("cuda permute_rows from the GPU counts and the GPU schedule") {
  // The GPU pipeline: count_assignments gives this rank's column of the token matrix, the
  // schedule is computed on device, then the rows; all must equal the CPU's.
  for (auto [tokens, k, E, W, rank] : {std::array{300, 2, 8, 4, 1}, std::array{5000, 4, 32, 16, 15},
                                       std::array{1, 1, 3, 2, 0}}) {
    CAPTURE(tokens);
    Scenario s = make_scenario(uint32_t(tokens), tokens, k, E, W, rank, Routing::kSkewed);
    auto idx = to_device(s.idx);
    auto counts = poisoned<uint32_t>(size_t(E));
    SAL_CHECK_OK(kc::count_assignments(ctx(), idx.get(), tokens, k, E, counts.get()));
    std::vector<uint32_t> mine = to_host(counts);
    CHECK(mine == local_counts(s));
    std::vector<uint32_t> T = s.T;
    for (int e = 0; e < E; ++e) T[size_t(e) * W + rank] = mine[size_t(e)];
    auto dT = to_device(T), dR = to_device(s.R);
    auto send = poisoned<uint32_t>(size_t(E) * W * W);
    auto quota = poisoned<uint32_t>(size_t(E) * W);
    kc::Buffer<int> bad;
    SAL_CHECK_OK(bad.allocate(1));
    SAL_CHECK_OK(kc::flexible_dispatch(ctx(), dT.get(), dR.get(), E, W, send.get(), quota.get(), bad.get()));
    auto rows = poisoned<int32_t>(size_t(tokens) * k);
    kc::Buffer<uint8_t> ws;
    SAL_CHECK_OK(ws.allocate(kc::permute_workspace_bytes(tokens, k, E, W)));
    SAL_CHECK_OK(kc::permute_rows(ctx(), idx.get(), tokens, k, send.get(), E, W, rank, rows.get(), ws.get(), ws.size()));
    CHECK(to_host(bad)[0] == -1);
    CHECK(to_host(send) == s.send);
    CHECK(row_mismatches(to_host(rows), s.rows) == 0);
  }
}

TEST_CASE("cuda permute_rows marks assignments the schedule does not cover") {
  // The schedule under-counts expert 0 here by 3 (3 of its assignments get no row), or over-counts
  // it by 5 (5 rows are reserved that nobody fills; the last rows fall off the buffer); ids outside
  // [0, E) never get a row.
  for (int delta : {-3, 5}) {
    CAPTURE(delta);
    Scenario s = make_scenario(42, 200, 2, 6, 3, 1, Routing::kSkewed, false, delta);
    s.idx[7] = -1;
    s.idx[8] = 6;
    s.rows = reference_rows(s);
    std::vector<int32_t> got = gpu_rows(s);
    CHECK(row_mismatches(got, s.rows) == 0);
    CHECK(got[7] == -1);
    CHECK(got[8] == -1);
    int absent_expert0 = 0;  // under-counted: at least 1 (3, less the changed ids that were 0's)
    for (size_t a = 0; a < got.size(); ++a) absent_expert0 += s.idx[a] == 0 && got[a] == -1;
    CHECK((delta < 0 ? absent_expert0 >= 1 : absent_expert0 == 0));
    check_data_kernels(s, 36, 5);
  }
}

TEST_CASE("cuda permute, unpermute_combine and their backwards match the CPU path") {
  struct Shape {
    int tokens, k, experts, workers, rank, d;
    Routing routing;
    bool zero_quota_here;
  };
  const Shape shapes[] = {
      {1, 1, 1, 1, 0, 4, Routing::kRandom, false},       // M = 1, k = 1
      {1, 2, 3, 2, 1, 3, Routing::kRandom, false},       // M = 1, d not a multiple of 4
      {17, 1, 4, 3, 0, 64, Routing::kOneExpert, false},  // all tokens to one expert
      {50, 2, 8, 4, 2, 33, Routing::kHalfExperts, true}, // experts without tokens, zero quota here
      {129, 2, 12, 5, 4, 256, Routing::kGate, false},
      {300, 4, 16, 8, 7, 1000, Routing::kSkewed, true},
      {64, 8, 32, 4, 1, 4096, Routing::kGate, false},     // k = 8, d = 4096
      {2000, 2, 8, 2, 0, 130, Routing::kRandom, false},   // d % 4 == 2
  };
  uint32_t seed = 500;
  for (const Shape& sh : shapes) {
    CAPTURE(sh.tokens);
    CAPTURE(sh.k);
    Scenario s = make_scenario(++seed, sh.tokens, sh.k, sh.experts, sh.workers, sh.rank, sh.routing,
                               sh.zero_quota_here);
    check_data_kernels(s, sh.d, seed);
  }
  // Misaligned x and y (offset by one float): the scalar path on a d that would vectorise.
  Scenario s = make_scenario(77, 40, 2, 6, 3, 2, Routing::kRandom);
  check_data_kernels(s, 64, 78, 1);
}

TEST_CASE("cuda count_assignments counts each expert's local assignments") {
  for (auto [tokens, k, E] : {std::array{1, 1, 1}, std::array{1000, 2, 8}, std::array{65536, 8, 256},
                              std::array{0, 2, 4}}) {
    CAPTURE(tokens);
    Scenario s;
    s.tokens = tokens, s.k = k, s.experts = E;
    s.idx.resize(size_t(tokens) * k);
    std::mt19937 rng(static_cast<uint32_t>(tokens));
    for (auto& e : s.idx) e = std::uniform_int_distribution<int32_t>(-1, E)(rng);  // a few out of range
    auto idx = to_device(s.idx);
    auto counts = poisoned<uint32_t>(size_t(E));
    SAL_CHECK_OK(kc::count_assignments(ctx(), idx.get(), tokens, k, E, counts.get()));
    CHECK(to_host(counts) == local_counts(s));
  }
}

TEST_CASE("cuda permute functions reject bad arguments") {
  Scenario s = make_scenario(9, 10, 2, 4, 2, 0, Routing::kRandom);
  auto idx = to_device(s.idx);
  auto send = to_device(s.send);
  auto rows = poisoned<int32_t>(20);
  size_t need = kc::permute_workspace_bytes(10, 2, 4, 2);
  kc::Buffer<uint8_t> ws;
  SAL_CHECK_OK(ws.allocate(need));
  CHECK_FALSE(kc::permute_rows(ctx(), idx.get(), 10, 2, send.get(), 4, 2, 0, rows.get(), ws.get(), need - 1).ok());
  CHECK_FALSE(kc::permute_rows(ctx(), idx.get(), 10, 2, send.get(), 4, 2, 2, rows.get(), ws.get(), need).ok());
  CHECK_FALSE(kc::permute_rows(ctx(), idx.get(), 10, 9, send.get(), 4, 2, 0, rows.get(), ws.get(), need).ok());
  CHECK_FALSE(kc::permute_rows(ctx(), idx.get(), 10, 2, send.get(), 0, 2, 0, rows.get(), ws.get(), need).ok());
  auto x = poisoned<float>(40);
  auto buf = poisoned<float>(80);
  CHECK_FALSE(kc::permute(ctx(), x.get(), rows.get(), 10, 0, 4, buf.get()).ok());
  CHECK_FALSE(kc::permute(ctx(), x.get(), nullptr, 10, 2, 4, buf.get()).ok());
  CHECK_FALSE(kc::unpermute_combine(ctx(), buf.get(), rows.get(), nullptr, 10, 2, 4, x.get()).ok());
  CHECK_FALSE(kc::permute_backward(ctx(), buf.get(), rows.get(), -1, 2, 4, x.get()).ok());
  // Empty sizes are fine and touch nothing.
  SAL_CHECK_OK(kc::permute_rows(ctx(), nullptr, 0, 2, nullptr, 4, 2, 0, nullptr, nullptr, 0));
  SAL_CHECK_OK(kc::permute(ctx(), nullptr, nullptr, 0, 2, 4, static_cast<float*>(nullptr)));
  SAL_CHECK_OK(kc::unpermute_combine(ctx(), nullptr, nullptr, nullptr, 0, 2, 4, nullptr));
}
