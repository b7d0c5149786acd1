// failures.h — failure processes for the simulator: each node's time to its next failure drawn
// from an exponential law (a constant hazard: failures of the cluster form a Poisson process) or
// a Weibull law with shape k (k < 1: failures cluster early, as SPARe's trace fit k = 0.78 shows),
// by inverse transform from the library's seedable generator — the same seed gives the same times
// on every platform.
#pragma once

#include <cstdint>
#include <string>

#include "policy/algo/rng.h"
#include "core/result.h"

namespace sal::sim {

struct FailureLaw {
  enum class Kind { exponential, weibull } kind = Kind::exponential;
  double mean_s = 3600;   // mean time between one node's failures
  double shape = 1;       // Weibull k (1: exponential)

  // Scale λ of the Weibull with this mean: mean = λ Γ(1 + 1/k).
  double scale() const;
  std::string describe() const;
};

Result<FailureLaw> exponential(double mean_s);
Result<FailureLaw> weibull(double mean_s, double shape);

// Uniform in (0, 1), never 0 or 1.
double uniform01(algo::Rng& rng);
// One draw of a node's time to failure.
double time_to_failure(const FailureLaw& law, algo::Rng& rng);

}  // namespace sal::sim
