// test_run_files.cpp — the tests' own yardsticks, which a wrong result must not slip past: the
// weight distance treats a NaN or an infinity as infinitely far (std::max(0, NaN) is 0, which let
// a NaN weight pass every "bit for bit" check that used it).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "support/run_files.h"

using namespace sal::test;

TEST_CASE("unit distance: equal is 0, a difference is measured, NaN and Inf are infinitely far") {
  const std::vector<float> a = {1, 2, 3, 4};
  CHECK(unit_distance(a, a).relative == 0);
  CHECK(unit_distance(a, a).elementwise == 0);
  std::vector<float> b = a;
  b[3] = 4.5f;
  CHECK(unit_distance(a, b).elementwise == doctest::Approx(0.5));
  CHECK(unit_distance(a, b).relative == doctest::Approx(0.5 / std::sqrt(30.0)));
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    std::vector<float> c = a;
    c[1] = bad;
    CHECK(std::isinf(unit_distance(a, c).relative));
    CHECK(std::isinf(unit_distance(c, a).elementwise));
    CHECK(std::isinf(unit_distance(c, c).relative));  // a NaN matches nothing, itself included
    CHECK_FALSE(unit_distance(c, c).relative <= 1e-6);
  }
  CHECK_THROWS(unit_distance(a, {1, 2}));
}
