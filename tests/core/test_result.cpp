// test_result.cpp — errors as values, with context, and the rate limiter for bad-input logs.
#include <doctest/doctest.h>

#include "core/log.h"
#include "core/result.h"

using namespace sal;

namespace {
Result<int> half(int x) {
  if (x % 2) return fail("odd number ", x);
  return x / 2;
}
Status chain(int x) {
  SAL_TRY(half(x));
  return {};
}
}  // namespace

TEST_CASE("Result carries a value or an error with context") {
  CHECK(half(4).value() == 2);
  auto r = half(3);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().with_context("halving").message() == "halving: odd number 3");
  CHECK_FALSE(chain(5).ok());
  CHECK(chain(6).ok());
}

TEST_CASE("RateLimiter lets a few through per second and counts the rest") {
  RateLimiter rl(3);
  uint64_t suppressed = 0;
  int allowed = 0;
  for (int i = 0; i < 10; ++i) allowed += rl.allow(1'000'000'000, suppressed);
  CHECK(allowed == 3);
  CHECK(rl.allow(2'100'000'000, suppressed));
  CHECK(suppressed == 7);
}
