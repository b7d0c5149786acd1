// stacked.cpp — data-parallel groups that each hold the whole model (a node of the scenario is one
// group), with the redundancy policy deciding which shard types each group computes (real policy
// slots: policies/redundancy/*.lua):
//   spare            SPARe's Golomb stacks with r* (or the given r); after a failure the reordering
//                    controller finds the smallest all-reduce depth and the in-flight step is patched
//                    (mask_s); a wipe-out restores the checkpoint
//   replication      blocks of r groups share their shards: every step computes r rounds
//   checkpoint-only  no redundancy: every failure restores the checkpoint
// The step takes `depth` rounds of shard compute (stacked_step_s).
#include <chrono>
#include <cmath>

#include "policy/algo/spare.h"
#include "policy/policy_set.h"
#include "sim/strategy.h"
#include "sim/workload.h"

namespace sal::sim {
namespace {

class Stacked : public Strategy {
 public:
  Stacked(const StrategySpec& spec, const Scenario& s, std::string policy)
      : spec_(spec), s_(s), policy_(std::move(policy)) {}

  Status load_policy() {
    if (auto st = set_.load(policy::Kind::redundancy, policy_, "sim"); !st)
      return fail(spec_.label, ": redundancy_policy: ", st.error().message());
    return {};
  }

  Status start(const SimView& v) override {
    members_.clear();
    for (uint32_t n = 0; n < v.up.size(); ++n)
      if (v.up[n]) members_.push_back(n);
    if (members_.empty()) return fail("no group is up");
    index_.assign(v.up.size(), -1);
    for (size_t i = 0; i < members_.size(); ++i) index_[members_[i]] = int32_t(i);
    alive_.assign(members_.size(), true);
    current_.reset();
    auto d = decide();
    if (!d) return d.error();
    if (d->wipeout) return fail("a fresh layout is already wiped out");
    depth_ = redundancy_ == 1 || policy_ != "replication" ? double(d->depth()) : double(redundancy_);
    return {};
  }

  bool ready(const SimView& v) const override {
    for (bool u : v.up)
      if (u) return true;
    return false;
  }

  double step_s(const SimView& v) const override {
    (void)v;
    return v.workload.stacked_step_s(depth_, live_members());
  }

  Reaction on_down(const SimView& v, uint32_t node) override {
    (void)v;
    if (node >= index_.size() || index_[node] < 0 || !alive_[size_t(index_[node])]) return {};
    alive_[size_t(index_[node])] = false;
    auto d = decide();
    if (!d || d->wipeout) return {Reaction::Kind::restore, 0, -1, -1, d ? "wiped out" : d.error().message()};
    depth_ = policy_ == "replication" ? double(redundancy_) : double(std::max<uint32_t>(1, d->depth()));
    return {Reaction::Kind::masked, spec_.costs.mask_s, -1, -1, "masked"};
  }

  bool wants(const SimView& v, uint32_t node) const override {
    (void)v;
    (void)node;
    return false;  // a returned group waits for the next restart (a new layout)
  }

  Reaction adopt(const SimView& v) override {
    (void)v;
    return {};
  }

  double mean_time_between_restores(const SimView& v) const override {
    (void)v;
    if (s_.failures.source != FailureSpec::Source::law) return 0;
    double per_group = s_.failures.law.mean_s, n = double(members_.empty() ? s_.cluster.nodes : members_.size());
    if (policy_ == "none" || redundancy_ <= 1) return per_group / n;
    if (policy_ == "spare") {
      auto mu = algo::mean_failures_endured(int(n), int(redundancy_));
      if (mu) return (*mu + 1) * per_group / n;  // the wipe-out is the (μ+1)-th failure
    }
    // r-fold blocks: a block of r dies after about (n/r)^(1−1/r)·Γ(1+1/r) failures (birthday-like).
    double blocks = n / redundancy_;
    return std::tgamma(1 + 1.0 / redundancy_) * std::pow(blocks, 1 - 1.0 / redundancy_) * redundancy_ * per_group / n;
  }

 private:
  uint32_t live_members() const {
    uint32_t n = 0;
    for (bool a : alive_) n += a;
    return n;
  }

  Result<plan::ShardStacks> decide() {
    auto t0 = std::chrono::steady_clock::now();
    uint32_t r = policy_ == "none" ? 0 : spec_.redundancy;  // checkpoint-only has no redundancy to set
    policy::RedundancyInput in{uint32_t(members_.size()), alive_, r, bool(current_), current_ ? *current_ : plan::ShardStacks{}};
    auto d = set_.slot(policy::Kind::redundancy).decide(in);
    plan_wall_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++plans;
    if (!d.problem.empty() && d.decided_by.find("floor") != std::string::npos)
      return fail(spec_.label, ": the redundancy policy failed: ", d.problem);
    current_ = std::get<policy::RedundancyProposal>(d.proposal);
    redundancy_ = current_->redundancy;
    return *current_;
  }

  const StrategySpec& spec_;
  const Scenario& s_;
  std::string policy_;
  policy::PolicySet set_;
  std::vector<uint32_t> members_;   // the groups of the layout (node ids)
  std::vector<int32_t> index_;      // node -> group index, −1 when not a member
  std::vector<bool> alive_;
  std::optional<plan::ShardStacks> current_;
  uint32_t redundancy_ = 1;
  double depth_ = 1;
};

}  // namespace

Result<std::unique_ptr<Strategy>> make_stacked(const StrategySpec& spec, const Scenario& s) {
  std::string policy = spec.kind == "checkpoint-only" ? "none" : spec.kind == "replication" ? "replication" : spec.redundancy_policy;
  auto st = std::make_unique<Stacked>(spec, s, policy);
  if (auto ok = st->load_policy(); !ok) return ok.error();
  return std::unique_ptr<Strategy>(std::move(st));
}

}  // namespace sal::sim
