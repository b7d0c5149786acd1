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
  failure_rate_.observe(ask.workers, double(t0) / 1e9);  // issue 35: node losses between plans
  failures_ = failure_facts(ask.facts);
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
  if (job_.parallel.groups > 1) return grouped(workers);
  auto r = one_group(workers, current_placement(0, workers));
  if (!r) return r.error();
  job::PlanRecord rec;
  rec.plan.nodes = workers;
  rec.plan.slots = r->slots;
  rec.plan.experts = r->experts;
  rec.plan.floor = r->floor;
  rec.plan.layers = std::move(r->layers);
  rec.allocation_by = r->allocation_by;
  rec.placement_by = r->placement_by;
  rec.note = r->note;
  return rec;
}

// A whole model over `workers` positions: the allocation, then the placement (from `current`, the
// group's slot tables in the plan in force, when it had as many positions).
Result<Planner::GroupPlan> Planner::one_group(uint32_t workers, Placements current) {
  auto slots = uint32_t(job_.policies.slots), experts = uint32_t(job_.model.experts);
  if (uint64_t(workers) * slots < experts)
    return fail(workers, " workers x ", slots, " slots cannot hold ", experts, " experts once each");
  policy::AllocationInput ain{workers, slots, experts, uint32_t(job_.policies.min_replicas), loads_};
  auto alloc = policies_.slot(policy::Kind::allocation).decide(ain);
  const auto& ap = std::get<policy::AllocationProposal>(alloc.proposal);
  policy::PlacementInput pin{workers, slots, experts, ap.floor, ap.replicas, loads_, {}, failures_};
  pin.current = std::move(current);
  auto place = policies_.slot(policy::Kind::placement).decide(pin);
  const auto& pp = std::get<policy::PlacementProposal>(place.proposal);
  placement_choice_ = pp.choice;  // issue 35: job.plan().placement
  GroupPlan g;
  g.slots = slots;
  g.experts = experts;
  g.floor = ap.floor;
  for (size_t l = 0; l < ap.replicas.size(); ++l) g.layers.push_back({ap.replicas[l], pp.placement[l]});
  g.allocation_by = alloc.decided_by;
  g.placement_by = place.decided_by;
  g.note = ap.note;
  if (!pp.note.empty()) g.note += (g.note.empty() ? "" : "; ") + pp.note;
  return g;
}

// Issue 35: what the placement weighs survival by — the job file's failure rate, else the losses
// seen between plans; a wipe-out costs the steps a restore runs again (2 windows of sparse
// snapshots in peers, else half the dense snapshot period).
policy::FailureFacts Planner::failure_facts(const job::CheckpointFacts& facts) const {
  const policy::FailureSettings stated{job_.policies.node_mtbf_h, job_.policies.correlated_failures};
  const bool sparse = job_.train.peer_copies > 0 && current_;
  const double rerun = sparse ? 2.0 * std::max<uint32_t>(1, current_->plan.schedule.window)
                              : double(std::max<int64_t>(1, job_.train.checkpoint_every)) / 2;
  return policy::failure_facts(stated, failure_rate_, facts.iteration_s, rerun,
                               sparse ? "two sparse windows" : "half the dense snapshot period");
}

// The plan in force's slot tables of group `g`, layer by layer, when that group had `positions`
// positions (the placement policy starts from them); empty otherwise.
Planner::Placements Planner::current_placement(uint32_t g, uint32_t positions) const {
  Placements out;
  if (!current_ || plan::group_count(current_->plan) <= g) return out;
  plan::GroupSpan s = plan::group_span(current_->plan, g);
  if (s.count != positions) return out;
  for (const auto& l : current_->plan.layers)
    out.emplace_back(l.placement.begin() + s.first, l.placement.begin() + s.first + s.count);
  return out;
}

// parallel.groups = G: the workers split into G groups as evenly as possible (the first ones one
// more), each planned as a whole model. Fewer groups stay up when a share could not hold every
// expert (the rest are down: size 0, and the redundancy policy covers their shard types).
Result<job::PlanRecord> Planner::grouped(uint32_t workers) {
  const uint32_t G = uint32_t(job_.parallel.groups);
  const uint64_t slots = uint64_t(job_.policies.slots), experts = uint64_t(job_.model.experts);
  uint32_t up = std::min(G, workers);
  while (up > 0 && (workers / up) * slots < experts) --up;
  if (up == 0)
    return fail(workers, " workers x ", slots, " slots cannot hold ", experts, " experts once each");
  job::PlanRecord rec;
  rec.plan.nodes = workers;
  rec.plan.slots = uint32_t(slots);
  rec.plan.experts = uint32_t(experts);
  rec.plan.floor = ~0u;
  rec.plan.layers.resize(size_t(job_.model.layers));
  rec.plan.groups.assign(G, 0);
  for (uint32_t g = 0; g < up; ++g) rec.plan.groups[g] = workers / up + (g < workers % up ? 1 : 0);
  for (uint32_t g = 0; g < up; ++g) {
    auto r = one_group(rec.plan.groups[g], current_placement(g, rec.plan.groups[g]));
    if (!r) return r.error().with_context("group " + std::to_string(g));
    rec.plan.floor = std::min(rec.plan.floor, r->floor);
    for (size_t l = 0; l < r->layers.size(); ++l) {
      auto& into = rec.plan.layers[l];
      if (into.replicas.empty()) into.replicas.assign(size_t(experts), 0);
      for (size_t e = 0; e < r->layers[l].replicas.size(); ++e) into.replicas[e] += r->layers[l].replicas[e];
      for (auto& slots_of : r->layers[l].placement) into.placement.push_back(std::move(slots_of));
    }
    if (g == 0) {
      rec.allocation_by = r->allocation_by;
      rec.placement_by = r->placement_by;
      rec.note = r->note;
    }
  }
  if (up < G)
    rec.note += std::string(rec.note.empty() ? "" : "; ") + std::to_string(G - up) + " of " + std::to_string(G) +
                " groups down: " + std::to_string(workers) + " workers cannot make " + std::to_string(G) +
                " groups that each hold every expert";
  SAL_TRY(plan::check_groups(rec.plan));
  return rec;
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

// The redundancy policy stacks the G shard types over the groups that are up (G = 1: one type,
// one group). A wiped-out layout (a type with no host up) resets the stacks: each type is then
// computed by a group that is up, in turn, and the plan says so.
void Planner::decide_stacks(job::PlanRecord& r) {
  std::vector<bool> alive;
  for (uint32_t g = 0; g < plan::group_count(r.plan); ++g) alive.push_back(plan::group_span(r.plan, g).count > 0);
  auto d = policies_.slot(policy::Kind::redundancy)
               .decide(redundancy_input(std::move(alive), current_ ? current_->plan.stacks : plan::ShardStacks{}));
  r.plan.stacks = std::get<policy::RedundancyProposal>(d.proposal);
  r.redundancy_by = d.decided_by;
  if (r.plan.stacks.wipeout) {
    reset_stacks(r.plan.stacks);
    r.note += std::string(r.note.empty() ? "" : "; ") + "the shard stacks were wiped out (a shard type had no group up " +
              "hosting it): reset, each type computed by a group up in turn";
  }
}

// What the redundancy policy decides from: the groups, which are up, the job's r, and the stacks
// in force as the current ones (when they are for as many groups).
policy::RedundancyInput Planner::redundancy_input(std::vector<bool> alive, const plan::ShardStacks& current) const {
  policy::RedundancyInput in;
  in.groups = uint32_t(alive.size());
  in.alive = std::move(alive);
  in.redundancy = uint32_t(job_.parallel.redundancy);
  in.has_current = !current.hosts.empty() && current.hosts.size() == in.groups;
  if (in.has_current) in.current = current;
  return in;
}

Result<plan::ShardStacks> Planner::patch_stacks(const std::vector<bool>& alive, const plan::ShardStacks& current,
                                                std::string& decided_by) {
  auto d = policies_.slot(policy::Kind::redundancy).decide(redundancy_input(alive, current));
  decided_by = d.decided_by;
  auto stacks = std::get<policy::RedundancyProposal>(d.proposal);
  spdlog::info("patch stacks by {}: {}", d.decided_by, stacks.wipeout ? "wiped out" : "depth " + std::to_string(stacks.depth()));
  return stacks;
}

void Planner::reset_stacks(plan::ShardStacks& s) {
  std::vector<uint32_t> up;
  for (uint32_t g = 0; g < s.alive.size(); ++g)
    if (s.alive[g]) up.push_back(g);
  s.assignment.assign(s.alive.size(), {});
  s.hosts.assign(s.alive.size(), {});
  s.wipeout = up.empty();
  if (up.empty()) return;
  for (uint32_t t = 0; t < s.alive.size(); ++t) {
    uint32_t g = up[t % up.size()];
    s.assignment[g].push_back(t);
    s.hosts[g].push_back(t);
  }
  for (const auto& h : s.hosts) s.redundancy = std::max<uint32_t>(s.redundancy, uint32_t(h.size()));
}

}  // namespace sal::mesh
