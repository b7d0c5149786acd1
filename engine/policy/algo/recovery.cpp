// recovery.cpp — see recovery.h. Chooses a method per failure count and turns counts into answers.
#include "policy/algo/recovery.h"

#include <algorithm>
#include <optional>
#include <string>

#include "policy/algo/recovery_count.h"
#include "policy/algo/recovery_family.h"
#include "policy/algo/stats.h"

namespace sal::algo {
namespace {

using detail::FailureFamily;
using detail::NodeSet;

RecoveryEstimate exact_answer(int k, long double p, RecoveryMethod method, uint64_t count) {
  const double v = double(std::clamp(p, 0.0L, 1.0L));
  return {k, v, v, v, method, count};
}

// The answers that need no counting, if this is one of them.
std::optional<RecoveryEstimate> trivial_answer(const FailureFamily& f, int k) {
  if (f.unreplicated) return exact_answer(k, 0, RecoveryMethod::exact, 0);
  if (k >= f.nodes) return exact_answer(k, f.experts > 0 ? 0 : 1, RecoveryMethod::exact, 0);
  if (f.count_at_most(k) == 0) return exact_answer(k, 1, RecoveryMethod::exact, 0);
  return std::nullopt;
}

std::vector<NodeSet> critical_sets(const FailureFamily& f, int k) {
  return {f.minimal.begin(), f.minimal.begin() + std::ptrdiff_t(f.count_at_most(k))};
}

int union_size(const std::vector<NodeSet>& sets, int nodes) {
  std::vector<char> seen(size_t(nodes), 0);
  int u = 0;
  for (const auto& s : sets)
    for (int n : s) u += seen[n] ? 0 : (seen[n] = 1);
  return u;
}

Result<RecoveryEstimate> by_closed_form(const FailureFamily& f, int k) {
  if (!f.disjoint_up_to(k)) {
    const auto& a = f.minimal[f.disjoint_prefix];
    return fail("closed form needs pairwise-disjoint minimal expert node sets; a set of ", a.size(),
                " nodes starting at node ", a.front(), " overlaps a smaller or earlier one");
  }
  const auto blocks = critical_sets(f, k);
  const auto p = detail::closed_form_survival(f.nodes, blocks, k);
  return exact_answer(k, p[k], RecoveryMethod::closed_form, blocks.size());
}

Result<RecoveryEstimate> by_enumeration(const FailureFamily& f, int k, uint64_t limit) {
  const auto critical = critical_sets(f, k);
  if (k <= detail::kSmallFailures)  // counted directly, whatever the overlap and the node count
    return exact_answer(k, detail::small_survival(f.nodes, critical, k), RecoveryMethod::exact, critical.size());
  const uint64_t work = detail::enumeration_work(union_size(critical, f.nodes), k);
  if (work > limit)
    return fail("exact enumeration for ", k, " failures would visit ", work,
                " subsets, above the limit of ", limit);
  const auto counted = detail::enumerate_survival(f.nodes, critical, k);
  return exact_answer(k, counted.p, RecoveryMethod::exact, counted.visited);
}

Result<RecoveryEstimate> by_sampling(const FailureFamily& f, int k, const RecoveryOptions& o) {
  if (o.samples == 0) return fail("Monte Carlo needs at least one sample");
  const auto s = detail::sample_survival(f.nodes, critical_sets(f, k), k, o.samples, o.seed);
  const Interval ci = wilson_interval(s.survived, s.samples);
  return RecoveryEstimate{k, double(s.survived) / double(s.samples), ci.lo, ci.hi,
                          RecoveryMethod::monte_carlo, s.samples};
}

Result<RecoveryEstimate> automatic(const FailureFamily& f, int k, const RecoveryOptions& o) {
  if (f.disjoint_up_to(k)) return by_closed_form(f, k);
  if (auto exact = by_enumeration(f, k, o.enumeration_limit); exact.ok()) return exact;
  return by_sampling(f, k, o);
}

Result<RecoveryEstimate> estimate(const FailureFamily& f, int k, const RecoveryOptions& o) {
  if (k < 0) return fail("negative failure count ", k);
  if (auto t = trivial_answer(f, k)) return *t;
  switch (o.method) {
    case MethodChoice::closed_form: return by_closed_form(f, k);
    case MethodChoice::exact: return by_enumeration(f, k, o.enumeration_limit);
    case MethodChoice::monte_carlo: return by_sampling(f, k, o);
    case MethodChoice::automatic: break;
  }
  return automatic(f, k, o);
}

// Largest k for which the family's closed form holds (every minimal set of ≤ k nodes disjoint).
int closed_form_reach(const FailureFamily& f, int max_k) {
  if (f.disjoint_prefix == f.minimal.size()) return max_k;
  return std::min(max_k, int(f.minimal[f.disjoint_prefix].size()) - 1);
}

// Fills curve[k] for the k the shared closed form answers (automatic or forced closed form).
void shared_closed_form(const FailureFamily& f, const RecoveryOptions& o,
                        std::vector<std::optional<RecoveryEstimate>>& curve) {
  if (o.method != MethodChoice::automatic && o.method != MethodChoice::closed_form) return;
  const int reach = closed_form_reach(f, int(curve.size()) - 1);
  if (reach < 0) return;
  const std::vector<NodeSet> blocks(f.minimal.begin(),
                                    f.minimal.begin() + std::ptrdiff_t(f.count_at_most(reach)));
  const auto p = detail::closed_form_survival(f.nodes, blocks, reach);
  for (int k = 0; k <= reach; ++k)
    if (!trivial_answer(f, k))
      curve[k] = exact_answer(k, p[k], RecoveryMethod::closed_form, f.count_at_most(k));
}

// True when the last answer is an exact 0: P is non-increasing in k (every larger failure set
// contains a fatal one), so every later answer is an exact 0 too.
bool certainly_lost(const std::vector<RecoveryEstimate>& so_far) {
  return !so_far.empty() && so_far.back().method != RecoveryMethod::monte_carlo &&
         so_far.back().p == 0;
}

// One point of a curve whose earlier points are `so_far`.
Result<RecoveryEstimate> curve_point(const FailureFamily& f, int k, const RecoveryOptions& o,
                                     const std::vector<RecoveryEstimate>& so_far) {
  if (certainly_lost(so_far)) return exact_answer(k, 0, so_far.back().method, 0);
  auto e = estimate(f, k, o);
  if (!e.ok()) return e.error().with_context(std::to_string(k) + " failures");
  return e;
}

}  // namespace

std::string_view method_name(RecoveryMethod m) {
  switch (m) {
    case RecoveryMethod::exact: return "exact";
    case RecoveryMethod::closed_form: return "closed-form";
    case RecoveryMethod::monte_carlo: return "monte-carlo";
  }
  return "unknown";
}

Result<RecoveryEstimate> joint_recovery_probability(const std::vector<LayerPlacement>& layers,
                                                    int failures, const RecoveryOptions& options) {
  auto family = detail::build_family(layers, failures);
  if (!family.ok()) return family.error();
  return estimate(*family, failures, options);
}

Result<RecoveryEstimate> recovery_probability(const LayerPlacement& layer, int failures,
                                              const RecoveryOptions& options) {
  return joint_recovery_probability({layer}, failures, options);
}

Result<RecoveryReport> recovery_report(const std::vector<LayerPlacement>& layers, int failures,
                                       const RecoveryOptions& options) {
  RecoveryReport report;
  for (size_t i = 0; i < layers.size(); ++i) {
    auto r = recovery_probability(layers[i], failures, options);
    if (!r.ok()) return r.error().with_context("layer " + std::to_string(i));
    report.layers.push_back(*r);
  }
  auto joint = joint_recovery_probability(layers, failures, options);
  if (!joint.ok()) return joint.error();
  report.joint = *joint;
  return report;
}

Result<std::vector<RecoveryEstimate>> recovery_curve(const std::vector<LayerPlacement>& layers,
                                                     int max_failures,
                                                     const RecoveryOptions& options) {
  if (max_failures < 0) return fail("negative failure count ", max_failures);
  auto family = detail::build_family(layers, max_failures);
  if (!family.ok()) return family.error();
  std::vector<std::optional<RecoveryEstimate>> curve(size_t(max_failures) + 1);
  shared_closed_form(*family, options, curve);
  std::vector<RecoveryEstimate> out;
  for (int k = 0; k <= max_failures; ++k) {
    if (!curve[k]) {
      auto e = curve_point(*family, k, options, out);
      if (!e.ok()) return e.error();
      curve[k] = *e;
    }
    out.push_back(*curve[k]);
  }
  return out;
}

}  // namespace sal::algo
