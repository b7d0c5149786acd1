// fixed_ep.cpp — the fixed-ep-ft baseline (DeepSpeed-MoE style expert parallelism with fault
// tolerance by data-parallel copies): the job runs as many whole expert-parallel groups as the live
// nodes make (plan/fixed_ep.h: ep = ceil(E / slots) nodes per group), leaves the rest idle, drops a
// group that loses a node (its survivors idle), forms new groups when enough nodes are idle, and
// restores the checkpoint only when no whole group is left.
#include "plan/fixed_ep.h"
#include "sim/strategy.h"
#include "sim/workload.h"

namespace sal::sim {
namespace {

class FixedEp : public Strategy {
 public:
  FixedEp(const StrategySpec& spec, const Scenario& s) : spec_(spec), s_(s) {
    ep_ = plan::ep_size(s.workload.experts, slots());
  }

  Status start(const SimView& v) override {
    groups_.clear();
    form_groups(v);
    if (groups_.empty()) return fail("fewer live nodes than one expert-parallel group (", ep_, ")");
    return replan();
  }

  bool ready(const SimView& v) const override { return idle_up(v).size() + nodes_in_use() >= ep_; }

  double step_s(const SimView& v) const override { return step_time_.get(v.workload, plan_, v.step); }

  Reaction on_down(const SimView& v, uint32_t node) override {
    (void)v;
    for (size_t g = 0; g < groups_.size(); ++g)
      for (auto n : groups_[g])
        if (n == node) {
          groups_.erase(groups_.begin() + long(g));
          if (groups_.empty()) return {Reaction::Kind::restore, 0, -1, -1, "no whole group left"};
          if (!replan()) return {Reaction::Kind::restore, 0, -1, -1, "re-plan failed"};
          return {Reaction::Kind::reconfigure, spec_.costs.detect_s + spec_.costs.plan_s + spec_.costs.rebuild_s, -1, -1,
                  "group dropped"};
        }
    return {};
  }

  bool wants(const SimView& v, uint32_t node) const override {
    (void)node;
    return idle_up(v).size() >= ep_;
  }

  Reaction adopt(const SimView& v) override {
    size_t before = groups_.size();
    form_groups(v);
    if (groups_.size() == before) return {};
    if (!replan()) return {Reaction::Kind::restore, 0, -1, -1, "re-plan failed"};
    // Each new group's nodes fetch a whole model's experts from a surviving group.
    double migrate = double(slots()) * s_.workload.layers * s_.workload.layer_weight * s_.step.expert_state_bytes /
                     s_.step.p2p_Bps;
    return {Reaction::Kind::reconfigure, spec_.costs.plan_s + migrate + spec_.costs.rebuild_s, -1, -1, "group formed"};
  }

  double mean_time_between_restores(const SimView& v) const override {
    (void)v;
    if (s_.failures.source != FailureSpec::Source::law) return 0;
    return s_.failures.law.mean_s / double(s_.cluster.nodes);
  }

 private:
  uint32_t nodes_in_use() const { return uint32_t(groups_.size()) * ep_; }
  uint32_t slots() const { return s_.cluster.gpus_per_node * s_.cluster.slots_per_gpu; }

  std::vector<uint32_t> idle_up(const SimView& v) const {
    std::vector<bool> used(v.up.size(), false);
    for (const auto& g : groups_)
      for (auto n : g) used[n] = true;
    std::vector<uint32_t> out;
    for (uint32_t n = 0; n < v.up.size(); ++n)
      if (v.up[n] && !used[n]) out.push_back(n);
    return out;
  }

  void form_groups(const SimView& v) {
    auto idle = idle_up(v);
    for (size_t i = 0; i + ep_ <= idle.size(); i += ep_) groups_.emplace_back(idle.begin() + long(i), idle.begin() + long(i + ep_));
  }

  Status replan() {
    auto p = plan::fixed_ep_plan(s_.workload.layers, s_.workload.experts, slots(), uint32_t(groups_.size()));
    if (!p) return p.error();
    plan_ = std::move(*p);
    step_time_.invalidate();
    ++plans;
    return {};
  }

  const StrategySpec& spec_;
  const Scenario& s_;
  uint32_t ep_ = 1;
  std::vector<std::vector<uint32_t>> groups_;
  plan::Plan plan_;
  PlanStepTime step_time_;
};

}  // namespace

Result<std::unique_ptr<Strategy>> make_fixed_ep(const StrategySpec& spec, const Scenario& s) {
  return std::unique_ptr<Strategy>(std::make_unique<FixedEp>(spec, s));
}

}  // namespace sal::sim
