// test_shadows.cpp — which experts a layer shadows (runtime/shadows.h), as pure logic over the
// dispatcher's schedules: a step whose tokens all go to two experts held once shadows both (either
// alone makes no rank less busy), a balanced step shadows none, a gain below the threshold shadows
// none, a rank of weight 0 with tokens for an expert keeps it unshadowed, the source is the lowest
// holder, and the schedule afterwards keeps every shadowed token where it is while still assigning
// every token exactly once.
#include <doctest/doctest.h>

#include <random>

#include "runtime/shadows.h"

using namespace sal;
using namespace sal::runtime;

namespace shadows_test {
namespace {

// 4 experts held once each on 4 ranks (expert e on rank e).
Counts one_each() { return {{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}}; }

int64_t busiest(const DispatchSchedule& s) {
  int64_t most = 0;
  for (int i = 0; i < s.workers; ++i) {
    int64_t rows = 0;
    for (int e = 0; e < s.experts; ++e) rows += s.quota[size_t(e)][size_t(i)];
    most = std::max(most, rows);
  }
  return most;
}

}  // namespace

TEST_CASE("shadows: a step crowded onto two experts shadows both, and the busiest rank's rows halve") {
  Counts tokens = {{100, 100, 100, 100}, {100, 100, 100, 100}, {0, 0, 0, 0}, {0, 0, 0, 0}};
  auto s = flexible_dispatch(tokens, one_each());
  REQUIRE(s);
  CHECK(busiest(*s) == 400);
  const ShadowPlan p = choose_shadows(*s, one_each(), {}, 10);
  CHECK(p.shadowed(0));
  CHECK(p.shadowed(1));
  CHECK_FALSE(p.shadowed(2));
  CHECK(p.source[0] == 0);
  CHECK(p.source[1] == 1);
  keep_shadowed_local(*s, p);
  CHECK(busiest(*s) == 200);
  for (int j = 0; j < 4; ++j) {
    CHECK(s->sent(0, j, j) == 100);
    CHECK(s->quota[0][size_t(j)] == 100);
  }
  CHECK(computes_shadow(*s, one_each(), p, 0, 2));
  CHECK_FALSE(computes_shadow(*s, one_each(), p, 0, 0));  // its holder computes it as itself
  CHECK_FALSE(computes_shadow(*s, one_each(), p, 2, 2));  // not shadowed
}

TEST_CASE("shadows: none for a balanced step, nor below the gain asked for") {
  Counts even = {{25, 25, 25, 25}, {25, 25, 25, 25}, {25, 25, 25, 25}, {25, 25, 25, 25}};
  auto s = flexible_dispatch(even, one_each());
  REQUIRE(s);
  CHECK_FALSE(choose_shadows(*s, one_each(), {}, 1).any());

  Counts mild = {{30, 30, 30, 30}, {20, 20, 20, 20}, {25, 25, 25, 25}, {25, 25, 25, 25}};  // busiest 120
  auto m = flexible_dispatch(mild, one_each());
  REQUIRE(m);
  CHECK(choose_shadows(*m, one_each(), {}, 1).any());  // 120 -> 100
  CHECK_FALSE(choose_shadows(*m, one_each(), {}, 50).any());
}

TEST_CASE("shadows: a rank of weight 0 with tokens for an expert keeps that expert unshadowed") {
  Counts tokens = {{100, 100, 100, 100}, {0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}};
  Counts units = {{1, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}, {0, 1, 0, 0}};
  auto s = flexible_dispatch(tokens, units);
  REQUIRE(s);
  const ShadowPlan p = choose_shadows(*s, units, {}, 10);
  CHECK(p.shadowed(0));
  CHECK(p.source[0] == 0);  // the lowest of its holders
  auto w = flexible_dispatch(tokens, units, {1, 1, 1, 0});
  REQUIRE(w);
  CHECK_FALSE(choose_shadows(*w, units, {1, 1, 1, 0}, 10).shadowed(0));
}

TEST_CASE("shadows: randomized, every token still computed exactly once, and never a busier rank") {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    const int E = 2 + int(rng() % 7), W = 2 + int(rng() % 6);
    Counts units(size_t(E), std::vector<uint32_t>(size_t(W), 0)), tokens = units;
    for (int e = 0; e < E; ++e) {
      units[size_t(e)][rng() % size_t(W)] += 1;
      if (rng() % 3 == 0) units[size_t(e)][rng() % size_t(W)] += 1;
      const bool hot = rng() % 3 == 0;
      for (int j = 0; j < W; ++j) tokens[size_t(e)][size_t(j)] = uint32_t(rng() % (hot ? 400 : 40));
    }
    auto s = flexible_dispatch(tokens, units);
    REQUIRE(s);
    const int64_t before = busiest(*s);
    const ShadowPlan p = choose_shadows(*s, units, {}, 8);
    keep_shadowed_local(*s, p);
    CHECK(busiest(*s) <= before);
    for (int e = 0; e < E; ++e) {
      uint64_t total = 0, computed = 0, sent = 0;
      for (int j = 0; j < W; ++j) {
        total += tokens[size_t(e)][size_t(j)];
        computed += s->quota[size_t(e)][size_t(j)];
        for (int i = 0; i < W; ++i) sent += s->sent(e, j, i);
      }
      CHECK(computed == total);
      CHECK(sent == total);
      if (p.shadowed(e)) CHECK(units[size_t(e)][size_t(p.source[size_t(e)])] > 0);
    }
  }
}

}  // namespace shadows_test
