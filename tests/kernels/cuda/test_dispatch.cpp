// test_dispatch.cpp — the GPU flexible-dispatch schedule (kernels/cuda/dispatch.h) against the CPU
// schedule it must reproduce integer for integer (sal::runtime::flexible_dispatch): hand-worked
// cases, many random ones (zero units on some workers, several units per worker, all tokens on one
// worker, all units on one worker, large counts, up to 1024 workers), the error flag for an expert
// with tokens but no replica, and the all-to-all-v row counts derived for one rank.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/cuda/dispatch.h"
#include "runtime/dispatch.h"

namespace {

using namespace sal::test::gpu;
namespace rt = sal::runtime;

// A dispatch problem: tokens and units, [experts][workers] row-major.
struct Problem {
  int experts = 0, workers = 0;
  std::vector<uint32_t> tokens, units;

  uint32_t& t(int e, int j) { return tokens[size_t(e) * workers + j]; }
  uint32_t& u(int e, int j) { return units[size_t(e) * workers + j]; }
  rt::Counts counts(const std::vector<uint32_t>& flat) const {
    rt::Counts c(static_cast<size_t>(experts), std::vector<uint32_t>(static_cast<size_t>(workers)));
    for (int e = 0; e < experts; ++e)
      for (int j = 0; j < workers; ++j) c[size_t(e)][size_t(j)] = flat[size_t(e) * workers + j];
    return c;
  }
};

Problem make_problem(int experts, int workers) {
  Problem p;
  p.experts = experts;
  p.workers = workers;
  p.tokens.assign(size_t(experts) * workers, 0);
  p.units.assign(size_t(experts) * workers, 0);
  return p;
}

struct GpuSchedule {
  std::vector<uint32_t> send, quota;  // [E][W][W], [E][W]
  int bad = 0;
};

GpuSchedule run_gpu(const Problem& p) {
  auto tokens = to_device(p.tokens);
  auto units = to_device(p.units);
  auto send = poisoned<uint32_t>(size_t(p.experts) * p.workers * p.workers);
  auto quota = poisoned<uint32_t>(size_t(p.experts) * p.workers);
  kc::Buffer<int> bad;
  SAL_CHECK_OK(bad.allocate(1));
  SAL_CHECK_OK(bad.fill_bytes(0x11));  // not -1: the kernel must write the flag
  SAL_CHECK_OK(kc::flexible_dispatch(ctx(), tokens.get(), units.get(), p.experts, p.workers, send.get(), quota.get(),
                                     bad.get()));
  GpuSchedule g;
  g.send = to_host(send);
  g.quota = to_host(quota);
  g.bad = to_host(bad)[0];
  return g;
}

// The CPU schedule flattened like the GPU's.
GpuSchedule flatten(const rt::DispatchSchedule& s) {
  GpuSchedule f;
  for (int e = 0; e < s.experts; ++e) {
    for (int j = 0; j < s.workers; ++j) {
      f.quota.push_back(s.quota[size_t(e)][size_t(j)]);
      for (int i = 0; i < s.workers; ++i) f.send.push_back(s.sent(e, j, i));
    }
  }
  f.bad = -1;
  return f;
}

// Number of entries that differ (0 when equal); reports the first.
size_t mismatches(const std::vector<uint32_t>& got, const std::vector<uint32_t>& want, const char* what) {
  if (got.size() != want.size()) {
    FAIL_CHECK(what << ": size " << got.size() << " vs " << want.size());
    return want.size() + 1;
  }
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i]) {
      if (bad == 0) FAIL_CHECK(what << "[" << i << "] = " << got[i] << ", CPU " << want[i]);
      ++bad;
    }
  }
  return bad;
}

// Runs both and requires equal schedules (and the CPU's invariants, so the test itself is sound).
void check_against_cpu(const Problem& p) {
  auto cpu = rt::flexible_dispatch(p.counts(p.tokens), p.counts(p.units));
  REQUIRE_MESSAGE(cpu.ok(), (cpu.ok() ? "" : cpu.error().message()));
  GpuSchedule want = flatten(*cpu), got = run_gpu(p);
  CHECK(got.bad == -1);
  CHECK(mismatches(got.quota, want.quota, "quota") == 0);
  CHECK(mismatches(got.send, want.send, "send") == 0);
  // Row sums are the tokens, column sums the quotas.
  int W = p.workers;
  for (int e = 0; e < p.experts; ++e)
    for (int j = 0; j < W; ++j) {
      uint64_t row = 0, col = 0;
      for (int i = 0; i < W; ++i) {
        row += got.send[(size_t(e) * W + j) * W + i];
        col += got.send[(size_t(e) * W + i) * W + j];
      }
      REQUIRE(row == p.tokens[size_t(e) * W + j]);
      REQUIRE(col == got.quota[size_t(e) * W + j]);
    }
}

enum class Shape { kUniform, kOneWorkerTokens, kSparse, kLarge, kOneWorkerUnits };

Problem random_problem(std::mt19937& rng, int experts, int workers, Shape shape) {
  Problem p = make_problem(experts, workers);
  auto uni = [&](uint32_t lo, uint32_t hi) { return std::uniform_int_distribution<uint32_t>(lo, hi)(rng); };
  int hot = int(uni(0, uint32_t(workers - 1)));
  for (int e = 0; e < experts; ++e) {
    bool idle = shape == Shape::kSparse && uni(0, 3) == 0;  // an expert without tokens anywhere
    for (int j = 0; j < workers; ++j) {
      switch (shape) {
        case Shape::kUniform: p.t(e, j) = uni(0, 100), p.u(e, j) = uni(0, 3); break;
        case Shape::kOneWorkerTokens: p.t(e, j) = j == hot ? uni(0, 5000) : 0, p.u(e, j) = uni(0, 2); break;
        case Shape::kSparse: p.t(e, j) = (idle || uni(0, 2) != 0) ? 0 : uni(1, 40), p.u(e, j) = uni(0, 4) / 3 * uni(1, 4); break;
        case Shape::kLarge: p.t(e, j) = uni(0, 1000000), p.u(e, j) = uni(0, 8); break;
        case Shape::kOneWorkerUnits: p.t(e, j) = uni(0, 50), p.u(e, j) = j == hot ? uni(1, 3) : 0; break;
      }
    }
    uint64_t total = 0, r = 0;
    for (int j = 0; j < workers; ++j) total += p.t(e, j), r += p.u(e, j);
    if (total > 0 && r == 0) p.u(e, int(uni(0, uint32_t(workers - 1)))) = uni(1, 3);
  }
  return p;
}

}  // namespace

TEST_CASE("cuda flexible_dispatch matches hand-worked schedules") {
  // Expert 0: 6 tokens over 3 single units -> quotas 2,2,2; worker 0 keeps 2 and sends 2 to
  // worker 1 and 1 to worker 2. Expert 1: 7 tokens over units (2 on worker 0, 1 on worker 2):
  // unit quotas 3,2,2 -> 5,0,2; worker 1's 2 tokens and 2 of worker 2's 4 go to worker 0.
  Problem p = make_problem(2, 3);
  p.tokens = {5, 0, 1, /**/ 1, 2, 4};
  p.units = {1, 1, 1, /**/ 2, 0, 1};
  GpuSchedule g = run_gpu(p);
  CHECK(g.bad == -1);
  CHECK(g.quota == std::vector<uint32_t>{2, 2, 2, 5, 0, 2});
  CHECK(g.send == std::vector<uint32_t>{2, 2, 1, 0, 0, 0, 0, 0, 1, /**/ 1, 0, 0, 2, 0, 0, 2, 0, 2});
  check_against_cpu(p);

  // Zero-length intervals between sources and sinks: 10 tokens, units 1,0,2,1 -> quotas 3,0,5,2.
  // Surplus: worker 1 has 7, worker 3 has 1; spare: worker 0 has 3, worker 2 has 5.
  Problem q = make_problem(1, 4);
  q.tokens = {0, 7, 0, 3};
  q.units = {1, 0, 2, 1};
  GpuSchedule h = run_gpu(q);
  CHECK(h.quota == std::vector<uint32_t>{3, 0, 5, 2});
  CHECK(h.send == std::vector<uint32_t>{0, 0, 0, 0, 3, 0, 4, 0, 0, 0, 0, 0, 0, 0, 1, 2});
  check_against_cpu(q);

  // One worker, and an expert with neither tokens nor units.
  Problem one = make_problem(2, 1);
  one.tokens = {9, 0};
  one.units = {3, 0};
  GpuSchedule o = run_gpu(one);
  CHECK(o.quota == std::vector<uint32_t>{9, 0});
  CHECK(o.send == std::vector<uint32_t>{9, 0});
}

TEST_CASE("cuda flexible_dispatch matches the CPU schedule on random problems") {
  std::mt19937 rng(7);
  const Shape shapes[] = {Shape::kUniform, Shape::kOneWorkerTokens, Shape::kSparse, Shape::kLarge,
                          Shape::kOneWorkerUnits};
  const int sizes[][2] = {{1, 1}, {1, 2}, {3, 5}, {8, 8}, {16, 31}, {37, 64}, {5, 129}, {256, 8}, {2, 257}};
  int n = 0;
  for (auto sz : sizes)
    for (Shape s : shapes)
      for (int rep = 0; rep < 3; ++rep, ++n) {
        CAPTURE(sz[0]);
        CAPTURE(sz[1]);
        CAPTURE(int(s));
        check_against_cpu(random_problem(rng, sz[0], sz[1], s));
      }
  // Random sizes.
  for (int rep = 0; rep < 40; ++rep, ++n) {
    int E = std::uniform_int_distribution<int>(1, 40)(rng), W = std::uniform_int_distribution<int>(1, 80)(rng);
    Shape s = shapes[rep % 5];
    CAPTURE(E);
    CAPTURE(W);
    check_against_cpu(random_problem(rng, E, W, s));
  }
  CHECK(n > 100);
}

TEST_CASE("cuda flexible_dispatch with many workers splits the send matrix over blocks") {
  // 65536 / W rows per block: W = 300 -> 2 bands, 1000 -> 16 (the last one short), 1024 -> 16.
  std::mt19937 rng(11);
  for (int W : {300, 1000, 1024}) {
    CAPTURE(W);
    check_against_cpu(random_problem(rng, 3, W, Shape::kUniform));
    check_against_cpu(random_problem(rng, 2, W, Shape::kOneWorkerTokens));
    check_against_cpu(random_problem(rng, 2, W, Shape::kSparse));
  }
}

TEST_CASE("cuda flexible_dispatch flags the first expert with tokens but no replica") {
  std::mt19937 rng(3);
  Problem p = random_problem(rng, 8, 6, Shape::kUniform);
  for (int bad_e : {5, 3}) {
    for (int j = 0; j < p.workers; ++j) p.u(bad_e, j) = 0;
    p.t(bad_e, 2) = 4;
  }
  // Expert 6: no units and no tokens is fine.
  for (int j = 0; j < p.workers; ++j) p.u(6, j) = 0, p.t(6, j) = 0;
  CHECK_FALSE(rt::flexible_dispatch(p.counts(p.tokens), p.counts(p.units)).ok());
  GpuSchedule g = run_gpu(p);
  CHECK(g.bad == 3);
  // The flagged experts get all-zero rows; every other expert is scheduled as usual (the CPU
  // schedule of the same problem with their tokens removed).
  Problem fixed = p;
  for (int bad_e : {3, 5})
    for (int j = 0; j < p.workers; ++j) fixed.t(bad_e, j) = 0;
  auto cpu = rt::flexible_dispatch(fixed.counts(fixed.tokens), fixed.counts(fixed.units));
  REQUIRE(cpu.ok());
  GpuSchedule want = flatten(*cpu);
  CHECK(mismatches(g.quota, want.quota, "quota") == 0);
  CHECK(mismatches(g.send, want.send, "send") == 0);

  // No experts: nothing to schedule, the flag still says "none".
  kc::Buffer<int> flag;
  SAL_CHECK_OK(flag.allocate(1));
  SAL_CHECK_OK(flag.fill_bytes(0x11));
  SAL_CHECK_OK(kc::flexible_dispatch(ctx(), nullptr, nullptr, 0, 4, nullptr, nullptr, flag.get()));
  CHECK(to_host(flag)[0] == -1);
}

TEST_CASE("cuda flexible_dispatch rejects bad arguments") {
  kc::Buffer<int> flag;
  SAL_CHECK_OK(flag.allocate(1));
  auto t = to_device(std::vector<uint32_t>(4, 1));
  auto send = poisoned<uint32_t>(8);
  auto quota = poisoned<uint32_t>(4);
  CHECK_FALSE(kc::flexible_dispatch(ctx(), t.get(), t.get(), 1, kc::kMaxDispatchWorkers + 1, send.get(), quota.get(),
                                    flag.get()).ok());
  CHECK_FALSE(kc::flexible_dispatch(ctx(), t.get(), t.get(), 1, 2, send.get(), quota.get(), nullptr).ok());
  CHECK_FALSE(kc::flexible_dispatch(ctx(), t.get(), nullptr, 1, 2, send.get(), quota.get(), flag.get()).ok());
  CHECK_FALSE(kc::flexible_dispatch(ctx(), t.get(), t.get(), -1, 2, send.get(), quota.get(), flag.get()).ok());
  kc::Buffer<int64_t> rows;
  SAL_CHECK_OK(rows.allocate(4));
  CHECK_FALSE(kc::dispatch_row_counts(ctx(), send.get(), 1, 2, 2, rows.get(), rows.get()).ok());
  CHECK_FALSE(kc::dispatch_row_counts(ctx(), send.get(), 1, 2, -1, rows.get(), rows.get()).ok());
}

TEST_CASE("cuda dispatch_row_counts gives each rank its all-to-all-v counts") {
  std::mt19937 rng(5);
  for (auto [E, W] : std::vector<std::pair<int, int>>{{1, 1}, {4, 3}, {16, 8}, {7, 130}, {0, 5}}) {
    CAPTURE(E);
    CAPTURE(W);
    Problem p = E > 0 ? random_problem(rng, E, W, Shape::kUniform) : make_problem(0, W);
    auto cpu = rt::flexible_dispatch(p.counts(p.tokens), p.counts(p.units));
    REQUIRE(cpu.ok());
    cpu->workers = W;  // the CPU leaves workers 0 when there are no experts
    GpuSchedule g = flatten(*cpu);
    auto send = to_device(g.send);
    for (int rank : {0, W / 2, W - 1}) {
      auto send_rows = poisoned<int64_t>(size_t(W));
      auto recv_rows = poisoned<int64_t>(size_t(W));
      SAL_CHECK_OK(kc::dispatch_row_counts(ctx(), send.get(), E, W, rank, send_rows.get(), recv_rows.get()));
      auto s = to_host(send_rows), r = to_host(recv_rows);
      for (int i = 0; i < W; ++i) {
        CHECK(s[size_t(i)] == int64_t(cpu->total(rank, i)));
        CHECK(r[size_t(i)] == int64_t(cpu->total(i, rank)));
      }
    }
  }
}
