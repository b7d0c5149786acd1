// elastic.cpp — the strategies that plan every live node with the allocation and placement
// policies (real policy slots: the shipped Lua policies or any file), through the controller's
// planner's own sequence (policy::plan_group):
//   salamander          a failure re-plans over the survivors while every expert keeps a replica
//                       somewhere (detect + plan + migrate + rebuild), otherwise restores the
//                       checkpoint; returned nodes are taken in at a step boundary; optional
//                       load-driven re-plans every `rebalance_every` steps.
//   checkpoint-restart  the same plans, but any change of the nodes in use restores the checkpoint
//                       and restarts (torchelastic-style), joins included.
#include <chrono>
#include <set>

#include "policy/planner.h"
#include "sim/strategies/planned.h"
#include "sim/strategy.h"
#include "sim/workload.h"

namespace sal::sim {
namespace {

class Elastic : public Strategy {
 public:
  Elastic(const StrategySpec& spec, const Scenario& s, bool restart_on_change)
      : spec_(spec), s_(s), restart_on_change_(restart_on_change), held_(s.cluster.nodes) {}

  Status load_policies() {
    if (auto st = set_.load(policy::Kind::allocation, spec_.allocation, "sim"); !st)
      return fail(spec_.label, ": allocation: ", st.error().message());
    if (auto st = set_.load(policy::Kind::placement, spec_.placement, "sim"); !st)
      return fail(spec_.label, ": placement: ", st.error().message());
    return {};
  }

  Status start(const SimView& v) override {
    held_.clear();
    auto r = replan(v);
    if (!r) return r.error();
    resumed(v);
    return {};
  }

  bool ready(const SimView& v) const override { return slots() * live(v) >= s_.workload.experts; }

  double step_s(const SimView& v) const override { return step_time_.get(v.workload, plan_, v.step); }

  Reaction on_down(const SimView& v, uint32_t node) override {
    if (!held_.holds(node) && !pending_.count(node)) return {};
    Reaction r;
    r.failures_absorbed = ++absorbed_;
    if (s_.report.recovery_probability) r.p_survive = held_.p_survive_next(absorbed_);
    held_.lose(node);
    if (restart_on_change_ || !held_.complete(s_.workload.experts)) return restore(r);
    if (!ready(v)) return {Reaction::Kind::wait, 0, r.failures_absorbed, r.p_survive, "too few nodes"};
    auto pause = replan(v);
    if (!pause) return restore(r);
    r.kind = Reaction::Kind::reconfigure;
    r.pause_s = spec_.costs.detect_s + *pause;
    return r;
  }

  bool wants(const SimView& v, uint32_t node) const override { return v.up[node]; }

  Reaction adopt(const SimView& v) override {
    if (restart_on_change_) return {Reaction::Kind::restore, 0, -1, -1, "membership changed"};
    auto pause = replan(v);
    if (!pause) return {Reaction::Kind::restore, 0, -1, -1, pause.error().message()};
    return {Reaction::Kind::reconfigure, *pause, -1, -1, "joined"};
  }

  double rebalance(const SimView& v) override {
    if (spec_.rebalance_every <= 0 || restart_on_change_) return 0;
    auto pause = replan(v);
    if (!pause) return 0;
    resumed(v);
    return *pause;
  }

  void resumed(const SimView& v) override {
    (void)v;
    held_.commit(plan_, change_);
    absorbed_ = 0;
    pending_.clear();
    step_time_.invalidate();
  }

  double mean_time_between_restores(const SimView& v) const override {
    if (s_.failures.source != FailureSpec::Source::law) return 0;
    // The job's mean time between failures: exact for checkpoint-restart; for Salamander, whose
    // restores are far rarer, a conservative stand-in (it checkpoints as often as the baseline).
    return s_.failures.law.mean_s / double(std::max<uint32_t>(1, live(v)));
  }

 private:
  uint32_t slots() const { return s_.cluster.gpus_per_node * s_.cluster.slots_per_gpu; }
  static uint32_t live(const SimView& v) {
    uint32_t n = 0;
    for (bool u : v.up) n += u;
    return n;
  }

  Reaction restore(Reaction r) {
    held_.clear();
    r.kind = Reaction::Kind::restore;
    return r;
  }

  // A new plan over every live node, remapped onto them; the pause it costs (plan + migrate + rebuild).
  Result<double> replan(const SimView& v) {
    uint32_t n = live(v);
    if (n * slots() < s_.workload.experts) return fail("too few nodes");
    auto t0 = std::chrono::steady_clock::now();
    auto group = policy::plan_group(set_, {n, slots(), s_.workload.experts, spec_.min_replicas,
                                           v.workload.token_loads(v.step), {}});
    if (!group) return group.error();
    plan::Plan p;
    p.nodes = n, p.slots = slots(), p.experts = s_.workload.experts, p.floor = group->floor;
    p.layers = std::move(group->layers);
    auto change = held_.apply(p, v.up, s_);
    plan_wall_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++plans;
    if (!change) return change.error();
    plan_ = std::move(p);
    change_ = std::move(*change);
    for (auto node : change_.remap.node_of_position) pending_.insert(uint32_t(node));
    step_time_.invalidate();
    return spec_.costs.plan_s + change_.migrate_s + spec_.costs.rebuild_s;
  }

  const StrategySpec& spec_;
  const Scenario& s_;
  bool restart_on_change_;
  policy::PolicySet set_;
  plan::Plan plan_;
  Holdings held_;
  Holdings::Change change_;
  std::set<uint32_t> pending_;   // nodes of the plan being put in force
  int absorbed_ = 0;
  PlanStepTime step_time_;
};

}  // namespace

Result<std::unique_ptr<Strategy>> make_elastic(const StrategySpec& spec, const Scenario& s, bool restart_on_change) {
  auto e = std::make_unique<Elastic>(spec, s, restart_on_change);
  if (auto st = e->load_policies(); !st) return st.error();
  return std::unique_ptr<Strategy>(std::move(e));
}

}  // namespace sal::sim
