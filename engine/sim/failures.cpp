// failures.cpp — see failures.h.
#include "sim/failures.h"

#include <cmath>
#include <cstdio>

namespace sal::sim {

double FailureLaw::scale() const { return kind == Kind::exponential ? mean_s : mean_s / std::tgamma(1 + 1 / shape); }

std::string FailureLaw::describe() const {
  char buf[96];
  if (kind == Kind::exponential) std::snprintf(buf, sizeof buf, "exponential, mean %g s", mean_s);
  else std::snprintf(buf, sizeof buf, "Weibull k = %g, mean %g s", shape, mean_s);
  return buf;
}

Result<FailureLaw> exponential(double mean_s) {
  if (!(mean_s > 0)) return fail("a failure law needs a mean time between failures > 0, got ", mean_s);
  return FailureLaw{FailureLaw::Kind::exponential, mean_s, 1};
}

Result<FailureLaw> weibull(double mean_s, double shape) {
  if (!(mean_s > 0)) return fail("a failure law needs a mean time between failures > 0, got ", mean_s);
  if (!(shape > 0.05 && shape < 20)) return fail("Weibull shape k must be in (0.05, 20), got ", shape);
  return FailureLaw{FailureLaw::Kind::weibull, mean_s, shape};
}

double uniform01(algo::Rng& rng) { return (double(rng.next() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }

double time_to_failure(const FailureLaw& law, algo::Rng& rng) {
  double e = -std::log(uniform01(rng));  // a unit exponential
  if (law.kind == FailureLaw::Kind::exponential) return law.mean_s * e;
  return law.scale() * std::pow(e, 1 / law.shape);
}

}  // namespace sal::sim
