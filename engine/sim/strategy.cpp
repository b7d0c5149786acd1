// strategy.cpp — the strategy kinds and their factory (the modules are in strategies/).
#include "sim/strategy.h"

namespace sal::sim {

Result<std::unique_ptr<Strategy>> make_elastic(const StrategySpec& spec, const Scenario& s, bool restart_on_change);
Result<std::unique_ptr<Strategy>> make_fixed_ep(const StrategySpec& spec, const Scenario& s);
Result<std::unique_ptr<Strategy>> make_stacked(const StrategySpec& spec, const Scenario& s);

const std::vector<std::string>& strategy_kinds() {
  static const std::vector<std::string> kKinds = {"salamander", "checkpoint-restart", "fixed-ep-ft",
                                                  "spare",      "replication",        "checkpoint-only"};
  return kKinds;
}

Result<std::unique_ptr<Strategy>> make_strategy(const StrategySpec& spec, const Scenario& s) {
  if (spec.kind == "salamander") return make_elastic(spec, s, false);
  if (spec.kind == "checkpoint-restart") return make_elastic(spec, s, true);
  if (spec.kind == "fixed-ep-ft") return make_fixed_ep(spec, s);
  if (spec.kind == "spare" || spec.kind == "replication" || spec.kind == "checkpoint-only") return make_stacked(spec, s);
  return fail("strategy kind \"", spec.kind, "\" is unknown");
}

}  // namespace sal::sim
