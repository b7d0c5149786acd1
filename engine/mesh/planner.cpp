// planner.cpp — see planner.h.
#include "mesh/planner.h"

#include <spdlog/spdlog.h>

#include "core/clock.h"
#include "plan/fixed_ep.h"
#include "policy/operators.h"

namespace sal::mesh {
namespace {

// Until iterations and snapshots are measured, the checkpoint policy plans for this iteration time
// and a PCIe-class device-to-host bandwidth.
constexpr double kAssumedIterationS = 1.0;
constexpr double kAssumedBandwidth = 16e9;

}  // namespace

Planner::Planner(const job::JobConfig& job, std::function<void()> service)
    : job_(job),
      shape_(job::model_shape(job.model)),
      policies_(policy::PolicyOptions{job.policies.budget_ms, size_t(job.policies.memory_mb) << 20, {},
                                      std::move(service)}) {
  loads_.assign(size_t(job.model.layers), std::vector<double>(size_t(job.model.experts), 1.0));
}

Status Planner::configure(const std::map<std::string, job::rec::Policy>* journaled) {
  const auto& p = job_.policies;
  for (auto [kind, name] : {std::pair{policy::Kind::allocation, p.allocation}, std::pair{policy::Kind::placement, p.placement},
                            std::pair{policy::Kind::checkpoint, p.checkpoint}, std::pair{policy::Kind::redundancy, p.redundancy}}) {
    std::string slot(policy::kind_name(kind));
    if (journaled && journaled->count(slot)) {
      if (auto s = policies_.load(kind, journaled->at(slot).source, "journal"); !s)
        return Error("the journal's " + slot + " policy: " + s.error().message());
      continue;
    }
    std::string what = name;
    if (what.size() > 4 && what.substr(what.size() - 4) == ".lua" && what[0] != '/') what = job_.dir + "/" + what;
    if (auto s = policies_.load(kind, what, "job file"); !s)
      return Error("policies." + slot + ": " + s.error().message());
  }
  return {};
}

void Planner::resume(const plan::Plan& in_force) {
  job::PlanRecord r;
  r.plan = in_force;
  r.allocation_by = r.placement_by = r.checkpoint_by = r.redundancy_by = "the journal";
  current_ = std::move(r);
}

Result<job::PlanRecord> Planner::decide(const job::act::DecidePlan& ask) {
  int64_t t0 = mono_ns();
  if (ask.keep) return again(*ask.keep, ask.epoch);
  if (ask.loads) loads_ = *ask.loads;
  auto r = ask.fixed_groups ? fixed_ep(*ask.fixed_groups) : elastic(ask.workers);
  if (!r) return r;
  decide_schedule(ask.facts, *r);
  decide_stacks(*r);
  r->epoch = ask.epoch;
  r->plan.version = current_ ? current_->plan.version + 1 : 1;
  r->ms = double(mono_ns() - t0) / 1e6;
  current_ = *r;
  spdlog::info("plan {} for {} workers (epoch {}): allocation by {}, placement by {}, checkpoint by {} (window {}), "
               "redundancy by {} in {:.2f} ms{}",
               r->plan.version, r->plan.nodes, ask.epoch, r->allocation_by, r->placement_by, r->checkpoint_by,
               r->plan.schedule.window, r->redundancy_by, r->ms, r->note.empty() ? "" : " — " + r->note);
  return r;
}

// The plan in force again under the next number (a resumed job whose ranks all came back).
Result<job::PlanRecord> Planner::again(const plan::Plan& keep, Epoch epoch) {
  job::PlanRecord r;
  r.plan = keep;
  r.epoch = epoch;
  r.plan.version = current_ ? current_->plan.version + 1 : keep.version + 1;
  r.allocation_by = r.placement_by = r.checkpoint_by = r.redundancy_by = "plan " + std::to_string(keep.version) + " again";
  current_ = r;
  spdlog::info("plan {}: plan {} again (resumed)", r.plan.version, keep.version);
  return r;
}

Result<job::PlanRecord> Planner::elastic(uint32_t workers) {
  if (workers == 0) return fail("no ready workers to plan for");
  auto slots = uint32_t(job_.policies.slots), experts = uint32_t(job_.model.experts);
  if (uint64_t(workers) * slots < experts)
    return fail(workers, " workers x ", slots, " slots cannot hold ", experts, " experts once each");
  policy::AllocationInput ain{workers, slots, experts, uint32_t(job_.policies.min_replicas), loads_};
  auto alloc = policies_.slot(policy::Kind::allocation).decide(ain);
  const auto& ap = std::get<policy::AllocationProposal>(alloc.proposal);
  policy::PlacementInput pin{workers, slots, experts, ap.floor, ap.replicas, loads_, {}};
  if (current_ && current_->plan.nodes == workers)
    for (const auto& l : current_->plan.layers) pin.current.push_back(l.placement);
  auto place = policies_.slot(policy::Kind::placement).decide(pin);
  const auto& pp = std::get<policy::PlacementProposal>(place.proposal);
  job::PlanRecord r;
  r.plan.nodes = workers;
  r.plan.slots = slots;
  r.plan.experts = experts;
  r.plan.floor = ap.floor;
  for (size_t l = 0; l < ap.replicas.size(); ++l) r.plan.layers.push_back({ap.replicas[l], pp.placement[l]});
  r.allocation_by = alloc.decided_by;
  r.placement_by = place.decided_by;
  r.note = ap.note;
  return r;
}

Result<job::PlanRecord> Planner::fixed_ep(uint32_t groups) {
  auto p = plan::fixed_ep_plan(uint32_t(job_.model.layers), uint32_t(job_.model.experts), uint32_t(job_.policies.slots),
                               groups);
  if (!p) return p.error();
  job::PlanRecord r;
  r.plan = std::move(*p);
  r.allocation_by = r.placement_by = "fixed-ep (" + job_.train.recovery + " baseline)";
  return r;
}

// The checkpoint-window policy decides from the model's operators and what the driver measured
// (the assumptions stand in until it has).
void Planner::decide_schedule(const job::CheckpointFacts& facts, job::PlanRecord& r) {
  policy::CheckpointInput& in = checkpoint_input_;
  in.operators = policy::model_operators(shape_, facts.popularity);
  in.iteration_s = facts.iteration_s > 0 ? facts.iteration_s : kAssumedIterationS;
  in.bandwidth_Bps = facts.bandwidth_Bps > 0 ? facts.bandwidth_Bps : kAssumedBandwidth;
  in.iteration = facts.iteration;
  in.has_current = current_.has_value();
  if (current_) in.current = current_->plan.schedule;
  auto d = policies_.slot(policy::Kind::checkpoint).decide(in);
  r.plan.schedule = std::get<policy::CheckpointProposal>(d.proposal);
  r.checkpoint_by = d.decided_by;
}

// One data-parallel group (parallel.groups = 1): the redundancy policy lays out its one shard type.
void Planner::decide_stacks(job::PlanRecord& r) {
  policy::RedundancyInput in{1, {true}, 0, current_.has_value(), current_ ? current_->plan.stacks : plan::ShardStacks{}};
  auto d = policies_.slot(policy::Kind::redundancy).decide(in);
  r.plan.stacks = std::get<policy::RedundancyProposal>(d.proposal);
  r.redundancy_by = d.decided_by;
}

}  // namespace sal::mesh
