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

TEST_CASE("KindLog logs the first of each kind, then counts the rest of it for its quiet period") {
  KindLog log(10000);
  const int64_t s = 1'000'000'000;
  uint64_t suppressed = 99;
  int allowed = 0;
  for (int i = 0; i < 100000; ++i) allowed += log.allow("malformed", 5 * s + int64_t(i) * 100'000, suppressed);
  CHECK(allowed == 1);  // 10 000 a second for 10 s: one line
  CHECK(suppressed == 0);
  CHECK(log.allow("unknown type", 6 * s, suppressed));  // another kind has its own line
  CHECK_FALSE(log.allow("malformed", 14 * s, suppressed));
  CHECK(log.allow("malformed", 15 * s, suppressed));
  CHECK(suppressed == 100000);
  CHECK(KindLog::more(suppressed) == " (and 100000 more like it since the last line)");
  CHECK(KindLog::more(0).empty());
  for (int k = 0; k < 100; ++k) log.allow("kind " + std::to_string(k), 20 * s, suppressed);
  CHECK_FALSE(log.allow("kind 99", 21 * s, suppressed));  // past kMaxKinds: counted as "other"
}
