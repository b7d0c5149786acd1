// spare.cpp — SPARe's closed forms (see spare.h for each one's meaning and source).
#include "policy/algo/spare.h"

#include <algorithm>
#include <cmath>

namespace sal::algo {
namespace {

// γ / ln 2 rounded as the paper does: the offset in r* = ⌊log₂ N + 0.833⌋.
constexpr double kRedundancyOffset = 0.833;

Status check_groups(int groups, int redundancy) {
  if (groups < 1) return fail("need at least one group, got ", groups);
  if (redundancy < 1 || redundancy > groups)
    return fail("redundancy ", redundancy, " outside 1..", groups, " (the number of groups)");
  return ok_status();
}

Status check_times(double save, double mtbf, double restart) {
  if (!(std::isfinite(save) && save >= 0)) return fail("checkpoint save time must be >= 0");
  if (!(std::isfinite(mtbf) && mtbf > 0)) return fail("mean time between failures must be > 0");
  if (!(std::isfinite(restart) && restart >= 0)) return fail("restart time must be >= 0");
  return ok_status();
}

double period_formula(double save, double mtbf, double restart) {
  return save + std::sqrt(save * save + 2 * save * (mtbf + restart));
}

double availability_formula(double period, double save, double mtbf, double restart) {
  return (1 - save / period) * mtbf / (mtbf + restart + period / 2);
}

}  // namespace

Result<double> mean_failures_endured(int groups, int redundancy) {
  SAL_TRY(check_groups(groups, redundancy));
  const double r = redundancy;
  return std::tgamma(1 / r) / r * std::pow(double(groups), 1 - 1 / r);
}

Result<int> min_depth_bound(int groups, int failures) {
  if (groups < 1) return fail("need at least one group, got ", groups);
  if (failures < 0 || failures >= groups)
    return fail("failure count ", failures, " outside 0..", groups - 1);
  const int survivors = groups - failures;
  return (groups + survivors - 1) / survivors;
}

Result<double> mean_overhead(int groups, int redundancy, const std::vector<double>& depth_gap) {
  auto mu = mean_failures_endured(groups, redundancy);
  if (!mu.ok()) return mu.error();
  const int states = std::clamp(int(std::floor(*mu)), 1, groups);
  double sum = 0;
  for (int k = 0; k < states; ++k) {
    sum += *min_depth_bound(groups, k);
    if (size_t(k) < depth_gap.size()) sum += depth_gap[k];
  }
  return sum / states;
}

Result<int> optimal_redundancy(int groups) {
  if (groups < 1) return fail("need at least one group, got ", groups);
  const int r = int(std::floor(std::log2(double(groups)) + kRedundancyOffset));
  return std::clamp(r, 1, groups);
}

Result<double> availability(double period, double save, double mtbf, double restart) {
  SAL_TRY(check_times(save, mtbf, restart));
  if (!(std::isfinite(period) && period > save))
    return fail("checkpoint period ", period, " must exceed the save time ", save);
  return availability_formula(period, save, mtbf, restart);
}

Result<double> optimal_checkpoint_period(double save, double mtbf, double restart) {
  SAL_TRY(check_times(save, mtbf, restart));
  if (save == 0) return fail("with free checkpoints (save time 0) the best period is 0");
  return period_formula(save, mtbf, restart);
}

Result<double> optimal_availability(double save, double mtbf, double restart) {
  auto period = optimal_checkpoint_period(save, mtbf, restart);
  if (!period.ok()) return period.error();
  return availability_formula(*period, save, mtbf, restart);
}

Result<double> time_to_train_factor(int groups, int redundancy, double failure_interval,
                                    double save, double restart,
                                    const std::vector<double>& depth_gap) {
  auto overhead = mean_overhead(groups, redundancy, depth_gap);
  if (!overhead.ok()) return overhead.error();
  auto a = optimal_availability(save, *mean_failures_endured(groups, redundancy) * failure_interval,
                                restart);
  if (!a.ok()) return a.error();
  return *overhead / *a;
}

}  // namespace sal::algo
