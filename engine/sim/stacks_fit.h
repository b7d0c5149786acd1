// stacks_fit.h — `salamander sim stacks RUN_DIR`: the live engine and SPARe's model of the same run
// (parallel.groups). Every failure the run met in the middle of a step — its `patch` events and the
// aborts of steps that could not be patched, which name the workers lost and their groups — is
// replayed through the simulator's reordering model (algo::reorder, SPARe's HK-fixed / HK-free /
// min-cost flow) on the stacks of the plan in force (plans.jsonl), with the groups that were down
// and those the failure hit out: the model says masked at some depth (the step can be patched) or
// wiped out, and the run says patched or aborted. Each plan's all-reduce depth is compared with the
// model's minimal depth for the groups that plan had up. A run whose patches spread the lost types
// over the groups up (its patch events say "spread over groups up") is modelled so: a failure is
// masked while any group is up, whatever SPARe's model says of the types' hosts (its depth is still
// shown: 0 where SPARe's own patch would have been wiped out). The closed forms say what to expect over
// many failures: μ(N, r) failures endured before a wipe-out, the depth bound c(k) = ⌈N / (N − k)⌉.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"

namespace sal::sim {

struct StacksFailure {
  uint64_t step = 0;
  std::vector<uint32_t> hit;        // the groups that lost workers in the step
  uint32_t down_before = 0;         // groups the plan in force had down
  bool run_patched = false;         // the run: the step committed after a patch (else aborted)
  bool model_masked = false;        // the model: every type still hosted by a group in the step
                                    // (spread: some group still in it)
  bool model_spread = false;        // the run's patches spread, and the model with them
  uint32_t model_depth = 0;         // the model's minimal depth then (0: wiped out)
  bool agree() const { return run_patched == model_masked; }
};

struct StacksPlan {
  uint64_t plan = 0, step = 0;
  uint32_t groups_up = 0;
  uint32_t run_depth = 0, model_depth = 0;  // model_depth 0: wiped out
  bool agree() const { return run_depth == model_depth; }
};

struct StacksFit {
  std::string dir;
  uint32_t groups = 0, redundancy = 0;
  bool spread = false;  // the run's patches spread the lost types over the groups up
  std::vector<StacksFailure> failures;
  std::vector<StacksPlan> plans;
  std::optional<double> mean_endured;  // μ(N, r), where the closed form applies
  size_t agreeing() const;
  size_t compared() const { return failures.size() + plans.size(); }
};

// Reads RUN_DIR's plans.jsonl and events.csv; an error when the run has no data-parallel groups.
Result<StacksFit> fit_stacks(const std::string& run_dir);
std::string stacks_fit_text(const StacksFit& f);
nlohmann::ordered_json stacks_fit_json(const StacksFit& f);

}  // namespace sal::sim
