// test_placement_trace.cpp — issue 35's claims on real expert loads, on every file of the SmartMoE
// rank0 trace (../shared/data; skipped where it is absent, trace_main.cpp):
//   16 x 8: the frontier has a point with P(1) = 1 and median per-layer balance <= 1.15, and the
//           default placement chooses one (P(1) = 1, median <= 1.15), at the balance of the
//           frontier's most balanced point or better survival;
//   8 x 8:  no plan with P(1) = 1 can reach 1.15 on the hot files — every expert has exactly two
//           replicas, so one routed half the tokens puts a quarter of them on one node — and the
//           frontier comes within 3 % of that bound (which is not always attainable).
#include <doctest/doctest.h>

#include "support/trace_plans.h"

using namespace sal;
using namespace sal::test;

namespace {

constexpr double kTarget = 1.15;

}  // namespace

TEST_CASE("trace 16x8: a frontier point with P(1) = 1 and median balance <= 1.15, chosen by default, on every file") {
  policy::PolicySet set(trace_policy_options());
  const auto files = trace_files(smartmoe_rank0_dir());
  REQUIRE(files.size() >= 1);
  for (const auto& file : files) {
    CAPTURE(file);
    auto f = trace_figures(set, file, 16, 8, 2);
    REQUIRE_MESSAGE(f.ok(), f.error().message());
    CHECK(f->best.p[0] == 1.0);
    CHECK(f->best.median <= kTarget);
    CHECK(f->chosen.p[0] == 1.0);
    CHECK(f->chosen.median <= kTarget);
    CHECK(f->chosen.median <= f->best.median + 0.02);
    CHECK(f->chosen_by_counts <= f->chosen.median + 1e-3);  // the dispatcher's split by counts: never worse
    CHECK(f->chosen_by_counts <= 1.01);
    CHECK(f->mro.p[1] >= f->chosen.p[1]);  // mro stays the maximum-survival end
  }
}

TEST_CASE("trace 8x8: the bound rules out 1.15 where one expert takes half the tokens, and the frontier meets the bound") {
  policy::PolicySet set(trace_policy_options());
  const auto files = trace_files(smartmoe_rank0_dir());
  int above = 0;
  for (const auto& file : files) {
    CAPTURE(file);
    auto f = trace_figures(set, file, 8, 8, 2);
    REQUIRE_MESSAGE(f.ok(), f.error().message());
    CHECK(f->best.p[0] == 1.0);
    CHECK(f->best.median <= f->bound * 1.03);
    CHECK(f->chosen_by_counts >= f->bound - 1e-3);  // the bound holds for any split of the tokens
    above += f->bound > kTarget;
  }
  CHECK(above > 0);
}
