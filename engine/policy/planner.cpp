// planner.cpp — see planner.h.
#include "policy/planner.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/clock.h"
#include "plan/domains.h"
#include "plan/fixed_ep.h"
#include "policy/operators.h"

namespace sal::policy {
namespace {

// Until snapshots are measured, the checkpoint policy plans for a PCIe-class device-to-host bandwidth
// (and for kAssumedIterationS until iterations are).
constexpr double kAssumedBandwidth = 16e9;

// The whole path of a sparse slot against its writer's snapshot thread alone: the writer's ZeroMQ
// thread about as much again, each peer's receipt (its ZeroMQ thread, the MAC, the decoding, the
// checksum) about 1.5x (the quickstart, 2026-12-02, CPU ticks: 138 and 187 a peer against 122).
double path_per_writer_thread(uint32_t peers) { return 2.0 + 1.5 * double(peers); }

// The bandwidth the window is sized by: the writer's copy (MoEtion's rule: a GPU's device-to-host
// copy overlaps its compute), and with a CPU share, no more than the slot's whole path can move in
// that share of an iteration.
double window_bandwidth(const CheckpointFacts& f, double cpu_share, uint32_t peers) {
  const double copy = f.bandwidth_Bps > 0 ? f.bandwidth_Bps : kAssumedBandwidth;
  if (cpu_share <= 0 || f.path_Bps <= 0) return copy;
  return std::min(copy, cpu_share * f.path_Bps / path_per_writer_thread(peers));
}

}  // namespace

Planner::Planner(PlannerConfig cfg, std::function<void()> service)
    : cfg_(std::move(cfg)), policies_(PolicyOptions{cfg_.budget_ms, cfg_.memory_limit, {}, std::move(service)}) {
  loads_.assign(size_t(cfg_.shape.layers), std::vector<double>(size_t(cfg_.shape.experts), 1.0));
}

Status Planner::configure(const std::map<std::string, std::string>* journaled) {
  for (auto [kind, name] : {std::pair{Kind::allocation, cfg_.allocation}, std::pair{Kind::placement, cfg_.placement},
                            std::pair{Kind::checkpoint, cfg_.checkpoint},
                            std::pair{Kind::redundancy, cfg_.redundancy_policy},
                            std::pair{Kind::health, cfg_.health_policy}}) {
    std::string slot(kind_name(kind));
    if (journaled && journaled->count(slot)) {
      if (auto s = policies_.load(kind, journaled->at(slot), "journal"); !s)
        return Error("the journal's " + slot + " policy: " + s.error().message());
      continue;
    }
    std::string what = name;
    if (what.size() > 4 && what.substr(what.size() - 4) == ".lua" && what[0] != '/') what = cfg_.dir + "/" + what;
    if (auto s = policies_.load(kind, what, "job file"); !s)
      return Error("policies." + slot + ": " + s.error().message());
  }
  return {};
}

void Planner::resume(const plan::Plan& in_force) {
  PlanRecord r;
  r.plan = in_force;
  r.allocation_by = r.placement_by = r.checkpoint_by = r.redundancy_by = "the journal";
  current_ = std::move(r);
}

Result<PlanRecord> Planner::decide(const PlanAsk& ask) {
  int64_t t0 = mono_ns();
  if (ask.keep) return again(*ask.keep, ask.epoch);
  if (ask.loads) loads_ = *ask.loads, step_loads_ = ask.step_loads;
  failure_rate_.observe(ask.workers, double(t0) / 1e9);
  failures_ = failure_facts(ask.facts);
  moves_ = move_facts(ask.facts.replica_s, failures_, ask.workers, cfg_.rebalance_every, ask.facts.iteration_s);
  const bool in_racks = plan::shares_domains(ask.racks) && ask.racks.size() == plan::domain_count(ask.domains);
  hosts_ = plan::shares_domains(ask.domains) || in_racks ? plan::domain_sizes(ask.domains) : std::vector<uint32_t>{};
  racks_ = in_racks ? ask.racks : std::vector<uint32_t>{};
  auto r = ask.fixed_groups ? fixed_ep(*ask.fixed_groups) : elastic(ask.workers, ask.held);
  if (!r) return r;
  decide_schedule(ask.facts, *r);
  if (ask.fixed_groups || cfg_.groups <= 1) decide_stacks(*r);  // (grouped() decided its plan's, before the sizes)
  if (!ask.fixed_groups) deal_domains(ask.domains, *r);  // (after the stacks: groups sharing a host share no type)
  r->epoch = ask.epoch;
  r->plan.version = current_ ? current_->plan.version + 1 : 1;
  r->ms = double(mono_ns() - t0) / 1e6;
  current_ = *r;
  const std::string over_hosts = plan::on_hosts(r->plan);
  spdlog::info("plan {} for {} workers{} (epoch {}): allocation by {}, placement by {}, checkpoint by {} (window {}), "
               "redundancy by {} in {:.2f} ms{}",
               r->plan.version, r->plan.nodes, over_hosts, ask.epoch, r->allocation_by, r->placement_by, r->checkpoint_by,
               r->plan.schedule.window, r->redundancy_by, r->ms, r->note.empty() ? "" : " — " + r->note);
  return r;
}

// The plan in force again under the next number (a resumed job whose ranks all came back).
Result<PlanRecord> Planner::again(const plan::Plan& keep, Epoch epoch) {
  PlanRecord r;
  r.plan = keep;
  r.epoch = epoch;
  r.plan.version = current_ ? current_->plan.version + 1 : keep.version + 1;
  r.allocation_by = r.placement_by = r.checkpoint_by = r.redundancy_by = "plan " + std::to_string(keep.version) + " again";
  current_ = r;
  spdlog::info("plan {}: plan {} again (resumed)", r.plan.version, keep.version);
  return r;
}

// `held`: what each worker holds under the plan in force (the driver's), else the last plan
// decided when it had as many positions.
Result<PlanRecord> Planner::elastic(uint32_t workers, const Placements& held) {
  if (workers == 0) return fail("no ready workers to plan for");
  if (cfg_.groups > 1) return grouped(workers);
  const bool told = !held.empty() && held[0].size() == workers;
  auto r = one_group(workers, told ? held : current_placement(0, workers));
  if (!r) return r.error();
  PlanRecord rec;
  rec.plan.nodes = workers;
  rec.plan.slots = cfg_.slots;
  rec.plan.experts = uint32_t(cfg_.shape.experts);
  rec.plan.floor = r->floor;
  rec.plan.layers = std::move(r->layers);
  rec.allocation_by = r->allocation_by;
  rec.placement_by = r->placement_by;
  rec.note = r->note;
  rec.floor_note = r->allocation_note;
  return rec;
}

Result<GroupPlan> plan_group(PolicySet& set, const GroupAsk& ask) {
  if (uint64_t(ask.workers) * ask.slots < ask.experts)
    return fail(ask.workers, " workers x ", ask.slots, " slots cannot hold ", ask.experts, " experts once each");
  AllocationInput ain{ask.workers, ask.slots, ask.experts, ask.min_replicas, ask.loads};
  auto alloc = set.slot(Kind::allocation).decide(ain);
  const auto& ap = std::get<AllocationProposal>(alloc.proposal);
  PlacementInput pin{ask.workers, ask.slots,   ask.experts,  ap.floor,  ap.replicas, ask.loads,
                     ask.current, ask.failures, ask.hosts,    ask.racks, ask.steps, ask.dispatch_by_counts,
                     ask.moves};
  auto place = set.slot(Kind::placement).decide(pin);
  const auto& pp = std::get<PlacementProposal>(place.proposal);
  GroupPlan g;
  g.floor = ap.floor;
  for (size_t l = 0; l < ap.replicas.size(); ++l) g.layers.push_back({ap.replicas[l], pp.placement[l]});
  g.allocation_by = alloc.decided_by;
  g.placement_by = place.decided_by;
  g.note = g.allocation_note = ap.note;
  if (!pp.note.empty()) g.note += (g.note.empty() ? "" : "; ") + pp.note;
  g.choice = pp.choice;
  return g;
}

// A whole model over `workers` positions (from `current`, the group's slot tables in the plan in
// force, when it had as many positions).
Result<GroupPlan> Planner::one_group(uint32_t workers, Placements current) {
  // (hosts are told for a one-group plan; a group of a grouped plan spans some of them)
  const bool one = cfg_.groups <= 1;
  auto g = plan_group(policies_, {workers, cfg_.slots, uint32_t(cfg_.shape.experts), cfg_.min_replicas, loads_,
                                  std::move(current), failures_, one ? hosts_ : std::vector<uint32_t>{},
                                  one ? racks_ : std::vector<uint32_t>{}, step_loads_, cfg_.dispatch_by_counts,
                                  moves_});
  if (g) placement_choice_ = g->choice;
  return g;
}

// Hosts of several workers, or hosts in racks: the positions decided are dealt onto them
// (plan/domains.h), keeping the plan in force's deal when it is as good.
void Planner::deal_domains(const std::vector<uint32_t>& domains, PlanRecord& r) const {
  if (hosts_.empty() || domains.size() != r.plan.nodes) return;
  const bool same = current_ && current_->plan.nodes == r.plan.nodes && !current_->plan.domains.empty() &&
                    current_->plan.racks == racks_;
  r.plan.domains = plan::deal_domains(r.plan, domains, same ? &current_->plan.domains : nullptr, racks_);
  if (!r.plan.domains.empty()) r.plan.racks = racks_;
}

// The steps a restore runs again: as this job's restores did (median), else two sparse windows
// where snapshots are kept in peers (and taken: plan/schedule.h), else half the dense snapshot period.
FailureFacts Planner::failure_facts(const CheckpointFacts& facts) const {
  const bool sparse = cfg_.peer_copies > 0 && current_ &&
                      plan::sparse_not_taken(current_->plan.schedule, cfg_.checkpoint_every, cfg_.expert_logs).empty();
  const bool measured = facts.restore_rerun >= 0;
  const double rerun = measured ? facts.restore_rerun
                       : sparse ? 2.0 * std::max<uint32_t>(1, current_->plan.schedule.window)
                                : double(std::max<int64_t>(1, cfg_.checkpoint_every)) / 2;
  return policy::failure_facts(cfg_.failures, failure_rate_, facts.iteration_s, rerun,
                               measured ? "the job's restores, measured"
                               : sparse ? "two sparse windows"
                                        : "half the dense snapshot period",
                               {facts.replan_s, facts.restore_s, facts.switch_s});
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

// parallel.groups = G: the workers split into G groups as evenly as possible, each planned as a whole
// model. Fewer groups stay up when a share could not hold every expert (the rest are down: size 0,
// and the redundancy policy covers their shard types). The stacks are decided first (they depend
// only on which groups are up): the workers an even split leaves over go to the groups that compute
// the most shard types, so a group covering a down group's type is not also among the smallest.
Result<PlanRecord> Planner::grouped(uint32_t workers) {
  const uint32_t G = cfg_.groups;
  const uint64_t slots = cfg_.slots, experts = uint64_t(cfg_.shape.experts);
  uint32_t up = std::min(G, workers);
  while (up > 0 && (workers / up) * slots < experts) --up;
  if (up == 0)
    return fail(workers, " workers x ", slots, " slots cannot hold ", experts, " experts once each");
  PlanRecord rec;
  rec.plan.nodes = workers;
  rec.plan.slots = uint32_t(slots);
  rec.plan.experts = uint32_t(experts);
  rec.plan.floor = ~0u;
  rec.plan.layers.resize(size_t(cfg_.shape.layers));
  rec.plan.groups.assign(G, 0);
  for (uint32_t g = 0; g < up; ++g) rec.plan.groups[g] = workers / up;
  decide_stacks(rec);
  give_left_over(rec.plan, workers % up);
  for (uint32_t g = 0; g < up; ++g) {
    auto r = one_group(rec.plan.groups[g], current_placement(g, rec.plan.groups[g]));
    if (!r) return r.error().with_context("group " + std::to_string(g));
    if (r->floor < rec.plan.floor) rec.floor_note = r->allocation_note;
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
      rec.note = r->note + (rec.note.empty() || r->note.empty() ? "" : "; ") + rec.note;  // (the stacks' note after)
    }
  }
  if (up < G)
    rec.note += std::string(rec.note.empty() ? "" : "; ") + std::to_string(G - up) + " of " + std::to_string(G) +
                " groups down: " + std::to_string(workers) + " workers cannot make " + std::to_string(G) +
                " groups that each hold every expert";
  SAL_TRY(plan::check_groups(rec.plan));
  return rec;
}

// `left` more workers (fewer than the groups up), one each to the groups up that compute the most
// shard types in p.stacks (ties: the first); the groups' sizes then differ by one at most.
void Planner::give_left_over(plan::Plan& p, uint32_t left) {
  std::vector<uint32_t> order;
  for (uint32_t g = 0; g < p.groups.size(); ++g)
    if (p.groups[g] > 0) order.push_back(g);
  auto computes = [&p](uint32_t g) { return g < p.stacks.assignment.size() ? p.stacks.assignment[g].size() : 0; };
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return computes(a) > computes(b); });
  for (uint32_t i = 0; i < left && i < order.size(); ++i) ++p.groups[order[i]];
}

Result<PlanRecord> Planner::fixed_ep(uint32_t groups) {
  auto p = plan::fixed_ep_plan(uint32_t(cfg_.shape.layers), uint32_t(cfg_.shape.experts), cfg_.slots, groups);
  if (!p) return p.error();
  PlanRecord r;
  r.plan = std::move(*p);
  r.allocation_by = r.placement_by = "fixed-ep (" + cfg_.recovery + " baseline)";
  return r;
}

// The checkpoint-window policy decides from the model's operators and what the driver measured
// (the assumptions stand in until it has).
void Planner::decide_schedule(const CheckpointFacts& facts, PlanRecord& r) {
  CheckpointInput& in = checkpoint_input_;
  in.operators = model_operators(cfg_.shape, facts.popularity);
  in.iteration_s = facts.iteration_s > 0 ? facts.iteration_s : kAssumedIterationS;
  in.bandwidth_Bps = window_bandwidth(facts, cfg_.snapshot_cpu_share, cfg_.peer_copies);
  in.iteration = facts.iteration;
  in.has_current = current_.has_value();
  if (current_) in.current = current_->plan.schedule;
  auto d = policies_.slot(Kind::checkpoint).decide(in);
  r.plan.schedule = std::get<CheckpointProposal>(d.proposal);
  r.checkpoint_by = d.decided_by;
}

// The redundancy policy stacks the G shard types over the groups that are up (G = 1: one type,
// one group). A wiped-out layout (a type with no host up) resets the stacks: each type is then
// computed by a group that is up, in turn, and the plan says so.
void Planner::decide_stacks(PlanRecord& r) {
  std::vector<bool> alive;
  for (uint32_t g = 0; g < plan::group_count(r.plan); ++g) alive.push_back(plan::group_span(r.plan, g).count > 0);
  auto d = policies_.slot(Kind::redundancy)
               .decide(redundancy_input(std::move(alive), current_ ? current_->plan.stacks : plan::ShardStacks{}));
  r.plan.stacks = std::get<RedundancyProposal>(d.proposal);
  r.redundancy_by = d.decided_by;
  if (r.plan.stacks.wipeout) {
    reset_stacks(r.plan.stacks);
    r.note += std::string(r.note.empty() ? "" : "; ") + "the shard stacks were wiped out (a shard type had no group up " +
              "hosting it): reset, each type computed by a group up in turn";
  }
}

// What the redundancy policy decides from: the groups, which are up, the job's r, and the stacks
// in force as the current ones (when they are for as many groups).
RedundancyInput Planner::redundancy_input(std::vector<bool> alive, const plan::ShardStacks& current) const {
  RedundancyInput in;
  in.groups = uint32_t(alive.size());
  in.alive = std::move(alive);
  in.redundancy = cfg_.redundancy;
  in.has_current = !current.hosts.empty() && current.hosts.size() == in.groups;
  if (in.has_current) in.current = current;
  return in;
}

Result<plan::ShardStacks> Planner::patch_stacks(const std::vector<bool>& alive, const plan::ShardStacks& current,
                                                std::string& decided_by) {
  auto d = policies_.slot(Kind::redundancy).decide(redundancy_input(alive, current));
  decided_by = d.decided_by;
  auto stacks = std::get<RedundancyProposal>(d.proposal);
  spdlog::info("patch stacks by {}: {}", d.decided_by, stacks.wipeout ? "wiped out" : "depth " + std::to_string(stacks.depth()));
  return stacks;
}

HealthProposal Planner::health(const HealthInput& in, std::string& decided_by) {
  auto d = policies_.slot(Kind::health).decide(in);
  decided_by = d.decided_by;
  return std::get<HealthProposal>(d.proposal);
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

}  // namespace sal::policy
