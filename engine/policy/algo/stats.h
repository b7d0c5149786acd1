// stats.h — the small statistics the Monte-Carlo methods report: the Wilson score interval of a
// binomial proportion (well behaved near 0 and 1, where the normal approximation is not) and the
// two-sided z of a 95 % interval.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace sal::algo {

// Two-sided 95 % normal quantile (the inverse normal CDF at 0.975).
constexpr double kZ95 = 1.959963984540054;

struct Interval {
  double lo = 0;
  double hi = 1;
};

// Wilson score interval for `successes` out of `trials` (trials > 0) at normal quantile z.
inline Interval wilson_interval(uint64_t successes, uint64_t trials, double z = kZ95) {
  const double n = double(trials);
  const double p = double(successes) / n;
  const double z2n = z * z / n;
  const double center = (p + z2n / 2) / (1 + z2n);
  const double half = z / (1 + z2n) * std::sqrt(p * (1 - p) / n + z2n / (4 * n));
  return {std::max(0.0, center - half), std::min(1.0, center + half)};
}

}  // namespace sal::algo
