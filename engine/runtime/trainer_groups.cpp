// trainer_groups.cpp — the Trainer's data-parallel groups (parallel.groups > 1; groups.h): each
// rank's second data plane (its group's), the grouped step, and SPARe's patch of a step that lost
// ranks in the middle.
//
// A grouped step runs in two phases: the group's shard types (or its even part of the batch, where
// whole types would give the groups unequal work a rank: groups.h) over the group's plane (phase A,
// the gradients accumulating; the compute's step, whose plan names the group's plane), then one
// synchronisation over every rank of the plan (phase B). Before phase B the compute sets the
// gradients aside (Compute::backup_grads): the synchronisation sums in place, and a patch must
// start it again from this rank's own contribution. CPU and GPU workers alike (a GPU worker's group
// plane is host memory over Gloo, as a plan's of several workers sharing one GPU). A patch
// (wire::StepPatch) keeps the step: a rank of a group it drops contributes zero; a rank of another
// group restores its copy, computes the extra shard types the patch gives its group and its part of
// each type the patch spreads (groups.h: spread_part), and every rank the patch names synchronises
// over the patch's own plane (the plan's standby narrowed to them where every one holds it warm:
// standby_plane.h; else one connected while they compute), with the replica table of those ranks
// only.
//
// A degraded step (after a patched step commits; StepBegin.kept_patch) keeps that patch's
// arrangement: a rank of a dropped group only synchronises (zero gradients, the same update); a
// rank of another group computes, after a spreading patch, its group's even part of the whole
// batch in one pass (even_part), else its own shard types, then the patch's extra ones and spread
// parts; every rank synchronises over the patch's plane, connected already. A damaged group the
// patch has rejoin (its ranks left hold every expert) is a group of those ranks in the degraded
// steps (rejoined_role), over a plane of theirs connected during the patch, and takes its even part
// like the groups up.
#include <spdlog/fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <future>

#include "core/clock.h"
#include "runtime/distributed_exchange.h"
#include "runtime/trainer.h"

namespace sal::runtime {

namespace {

// A group's part of the batch as its errors name it: "sequences 6..11 (even part)".
std::string sequences_text(std::pair<int, int> part, const char* what) {
  return "sequences " + std::to_string(part.first) + ".." + std::to_string(part.first + part.second - 1) + " (" +
         what + ")";
}

// A patch's planes: its own (patch_plane), and first, on a rank of a group that rejoins the
// degraded steps (`rejoin`: Trainer::rejoin_options), the plane of that group's ranks left — while
// the others compute the patch, which that rank sits out.
struct PatchPlanes {
  PatchPlane patch;
  std::unique_ptr<comm::Collectives> rejoin;
};
Result<PatchPlanes> patch_planes(const std::vector<int>& members, const comm::GlooOptions& o, comm::StoreClient& store,
                                 std::unique_ptr<comm::Collectives> standby, const std::optional<comm::GlooOptions>& rejoin) {
  std::unique_ptr<comm::Collectives> group;
  if (rejoin) {
    auto c = comm::connect_gloo(*rejoin, store);
    if (!c) return c.error().with_context("the plane of the group's ranks left (to rejoin the degraded steps)");
    group = std::move(*c);
  }
  auto p = patch_plane(members, o, store, std::move(standby));
  if (!p) return p.error();
  return PatchPlanes{std::move(*p), std::move(group)};
}

}  // namespace

// A grouped plan's second data plane: the ranks of this rank's group, which its tokens cross.
// A group plane of the plan whose planes are intact (keep_planes_of), with the same ranks in the
// same order, is kept.
Status Trainer::connect_group(const wire::PlanUpdate& p) {
  auto held = std::atomic_load(&group_comm_);
  std::atomic_store(&group_comm_, std::shared_ptr<comm::Collectives>());
  if (plan::group_count(p.plan) <= 1) {
    group_plane_of_ = {};
    return {};
  }
  plan::GroupSpan span = plan::group_of(p.plan, uint32_t(p.my_rank));
  if (span.count == 0) return fail("plan ", p.number(), " puts rank ", p.my_rank, " in no group");
  PlaneOf want{p.keep_planes_of, {}};
  for (uint32_t i = span.first; i < span.first + span.count; ++i) want.ranks.emplace_back(p.ranks[i].node, p.ranks[i].index);
  if (keeps(p, held, group_plane_of_, want)) {
    spdlog::info("plan {} keeps group {}'s data plane of plan {}: the same {} ranks", p.number(), span.group,
                 p.keep_planes_of, span.count);
  } else {
    auto o = plane_options(p.my_rank - int(span.first), int(span.count),
                           wire::plan_keys(p.number()) + "/group-" + std::to_string(span.group));
    auto c = comm::connect_gloo(o, *std::atomic_load(&store_));
    if (!c) return c.error().with_context("plan " + std::to_string(p.number()) + " group " + std::to_string(span.group) +
                                          " data plane");
    held = std::shared_ptr<comm::Collectives>(comm::timed(std::move(*c), waits_));
  }
  group_plane_of_ = PlaneOf{p.number(), std::move(want.ranks)};
  std::atomic_store(&group_comm_, held);
  if (aborting_) held->abort("aborted by the controller");
  return {};
}

// ---------- the standby plane (standby_plane.h) ----------

namespace {

// Warms the standby: an allreduce this large sends each peer a part of tens of kilobytes, as a
// step's synchronisation does, so every peer's queue and descriptors are mapped.
constexpr size_t kStandbyWarmFloats = size_t(1) << 16;

}  // namespace

// A plan that keeps the planes of the plan before (the same ranks, intact) keeps its standby too,
// while that is still connecting or warm and no patch took it; any other is stopped.
void Trainer::keep_or_retire_standby(const wire::PlanUpdate& p) {
  if (!standby_) return;
  if (p.keep_planes_of != 0 && standby_of_ == PlaneOf{p.keep_planes_of, plan_ranks_} && standby_->live()) {
    standby_of_.plan = p.number();
    return;
  }
  standby_yard_.retire(std::move(standby_), "plan " + std::to_string(p.number()) + " replaces its plan");
}

// A plan of groups whose stacks can patch a step (a shard type hosted by two groups or more), over
// shared memory (the only plane that narrows), gets a standby unless it kept one.
void Trainer::start_standby(const wire::PlanUpdate& p) {
  standby_yard_.reap();
  if (standby_ || plan::group_count(p.plan) <= 1 || !p.plan.stacks.redundant()) return;
  auto plane = std::atomic_load(&comm_);
  if (!plane || !plane->narrows()) return;
  auto o = plane_options(p.my_rank, int(p.ranks.size()), wire::standby_keys(p.number()));
  standby_ = std::make_unique<StandbyPlane>(o, store_client(p.store), kStandbyWarmFloats);
  standby_of_ = PlaneOf{p.number(), plan_ranks_};
}

// The group's shard types one after another over the group's plane (the compute's plan names it:
// compute_plan), their gradients and stats accumulating. A type's balancing loss is gathered over
// the group and weighted by its share.
Status Trainer::compute_types(uint64_t step, const std::vector<uint32_t>& types, model::StepStats& total) {
  for (uint32_t t : types) {
    auto part = type_sequences(spec_.global_batch, role_.groups, t);
    SAL_TRY(compute_part(step, "shard type " + std::to_string(t), part, total));
  }
  return {};
}

// The group's sequences `group_part` (a shard type, a spread type's part, a degraded step's even
// part: `what`, for errors): this rank's share of them, in one pass, the balancing loss weighted by
// the part's share of the batch.
Status Trainer::compute_part(uint64_t step, const std::string& what, std::pair<int, int> group_part,
                             model::StepStats& total) {
  if (!std::atomic_load(&group_comm_)) return fail("plan ", plan_, ": no data plane for group ", role_.span.group);
  auto [first, count] = rank_part(group_part, role_now());
  model::Batch b = model::make_batch(corpus_, spec_.seed, step, first, count, spec_.dims.seq_len);
  b.routing = routing_.get();
  b.aux_share = double(group_part.second) / spec_.global_batch;
  auto stats = compute_->step(b, int64_t(spec_.global_batch) * spec_.dims.seq_len);
  if (!stats) return stats.error().with_context("step " + std::to_string(step) + " " + what);
  model::add_stats(total, *stats);
  return {};
}

// What a patch gives this rank's group on top of its own types: the extra types whole, and its part
// of each spread type (none for a damaged group).
Status Trainer::compute_patch_types(uint64_t step, const wire::StepPatch& p, model::StepStats& total) {
  const uint32_t g = role_.span.group;
  if (std::find(p.damaged.begin(), p.damaged.end(), g) != p.damaged.end()) return {};
  if (g < p.extra.size()) SAL_TRY(compute_types(step, p.extra[g], total));
  for (uint32_t t : p.spread) {
    auto part = spread_part(spec_.global_batch, role_, t, p.damaged);
    if (part.second == 0) continue;
    spdlog::debug("step {}: group {} computes sequences [{}, {}) of shard type {}", step, g, part.first,
                  part.first + part.second, t);
    SAL_TRY(compute_part(step, "part of shard type " + std::to_string(t), part, total));
  }
  return {};
}

// A plan whose groups would do unequal work a rank with whole types (groups.h: uneven_types)
// computes each group's even part of the batch in one pass; no copy is set aside then (a patch of
// the step runs this rank's own types again, as a degraded step's does).
Result<StepOutcome> Trainer::grouped_step(uint64_t step, int64_t t0) {
  backup_ok_ = false;
  model::StepStats total;
  faults_->at(wire::FaultPoint::forward, step);
  const auto even = role_.even ? even_part(spec_.global_batch, role_, {}) : std::pair{0, 0};
  if (even.second > 0) {
    SAL_TRY(compute_part(step, sequences_text(even, "even part"), even, total));
  } else {
    SAL_TRY(compute_types(step, role_.types, total));
    SAL_TRY(backup_grads());
    group_stats_ = total;
  }
  faults_->at(wire::FaultPoint::allreduce, step);
  return finish_grouped(*comm_, replicas_, shared_, std::move(total), t0);
}

// Phase B over `comm` (the plan's plane, or a patch's): the non-expert gradients over every rank,
// each expert's over its holders, the norm, and the balancing loss (each rank adds its share of
// its group's, so the sum is the batch's).
Result<StepOutcome> Trainer::finish_grouped(comm::Collectives& comm, const std::vector<Counts>& replicas,
                                            const std::vector<SharedExpert>& shared,
                                            model::StepStats total, int64_t t0) {
  if (auto s = compute_->sync_gradients_over(comm, shared); !s) return s.error().with_context("gradient sync");
  auto norm = compute_->grad_norm_over(comm, replicas);
  if (!norm) return norm.error();
  // the balancing loss and the experts' loads (a routing bias's), each rank its share of its group's
  const double members = double(std::max<uint32_t>(role_now().span.count, 1));
  model::RouterLoad load = model::zero_load(spec_.dims);  // every rank the same shape, whatever it computed
  model::add_router_load(load, total.router_load);
  std::vector<double> sums = model::flatten_load(load);
  for (double& v : sums) v /= members;
  sums.push_back(total.aux / members);
  if (comm.size() > 1) SAL_TRY(comm.allreduce_sum(sums.data(), sums.size()));
  total.aux = sums.back();
  sums.pop_back();
  total.router_load = model::unflatten_load(sums, load);
  router_load_ = total.router_load;
  last_norm_ = replay_ ? replay_->norm_for(step_).value_or(*norm) : *norm;
  have_grads_ = true;
  return StepOutcome{std::move(total), last_norm_, double(mono_ns() - t0) / 1e6,
                     model::learning_rate(spec_.optim, int64_t(step_))};
}

Status Trainer::backup_grads() {
  if (auto s = compute_->backup_grads(); !s) return s.error().with_context("setting the step's gradients aside");
  backup_ok_ = true;
  return {};
}

void Trainer::interrupt_for_patch(const wire::StepPatch& p) {
  const std::string why = "step " + std::to_string(p.step) + " patched: " + p.reason;
  if (auto c = std::atomic_load(&comm_)) c->abort(why);
  const int64_t g = group_now_;
  if (g >= 0 && std::find(p.damaged.begin(), p.damaged.end(), uint32_t(g)) != p.damaged.end())
    if (auto c = std::atomic_load(&group_comm_)) c->abort(why);
}

// A patch's computing on this rank: nothing for a rank of a dropped group (zero gradients); else
// its own shard types (restored from the copy set aside, or computed now if the loss came first)
// and the extra ones the patch gives its group.
Status Trainer::patch_compute(const wire::StepPatch& p, model::StepStats& total) {
  const uint32_t g = role_.span.group;
  if (std::find(p.damaged.begin(), p.damaged.end(), g) != p.damaged.end()) return compute_->zero_grads();
  if (backup_ok_) {
    if (auto s = compute_->restore_grads(); !s) return s.error().with_context("putting the step's gradients back");
    total = group_stats_;
  } else {  // the loss came before this rank's own pass began (in the step's validation), or the step
            // computed an even part rather than the group's types: run them now
    spdlog::info("step {} patch {}: group {} computes its own shard types [{}] first ({})", p.step, p.patch, g,
                 fmt::join(role_.types, ", "), role_.even ? "the step computed even parts" : "the loss came before them");
    SAL_TRY(compute_->zero_grads());
    SAL_TRY(compute_types(p.step, role_.types, total));
    SAL_TRY(backup_grads());
    group_stats_ = total;
  }
  if (g < p.extra.size() && !p.extra[g].empty())
    spdlog::info("step {} patch {}: group {} computes shard types [{}] too", p.step, p.patch, g, fmt::join(p.extra[g], ", "));
  std::vector<uint32_t> parts;  // the spread types this group has a part of (a small batch leaves some none)
  for (uint32_t t : p.spread)
    if (spread_part(spec_.global_batch, role_, t, p.damaged).second > 0) parts.push_back(t);
  if (!parts.empty())
    spdlog::info("step {} patch {}: group {} computes its part of shard types [{}] too", p.step, p.patch, g,
                 fmt::join(parts, ", "));
  return compute_patch_types(p.step, p, total);
}

Result<StepOutcome> Trainer::patch(const wire::StepPatch& p) {
  if (role_.groups <= 1 || plan_ != p.plan || step_ != p.step)
    return fail("patch ", p.patch, " of step ", p.step, " (plan ", p.plan, ") is not for the step this worker computes");
  int64_t t0 = mono_ns();
  auto me = std::find(p.ranks.begin(), p.ranks.end(), uint32_t(rank_));
  if (me == p.ranks.end()) return fail("patch ", p.patch, " of step ", p.step, " does not name rank ", rank_);
  // The patch's plane is agreed on (the standby narrowed) or connected while this rank computes:
  // the store round waits on the other ranks', which are computing too. An abort interrupts it
  // (the store), so a patch that fails while computing does not wait long for it to end. The
  // standby serves one patch: a later one (a second loss) connects its own.
  auto o = plane_options(int(me - p.ranks.begin()), int(p.ranks.size()),
                         wire::plan_keys(p.plan) + "/" + wire::patch_keys(p.step, p.patch));
  std::unique_ptr<comm::Collectives> standby = standby_ ? standby_->take() : nullptr;
  if (standby_) standby_yard_.retire(std::move(standby_), "step " + std::to_string(p.step) + " patched");
  degraded_role_.reset();  // the plan's arrangement until this patch is in (a degraded step's, replaced)
  auto rejoin = rejoin_options(p, o.prefix);
  if (!rejoin) return rejoin.error();
  auto connecting = std::async(std::launch::async, [ranks = p.ranks, o, store = std::atomic_load(&store_),
                                                     s = std::move(standby), r = *rejoin]() mutable {
    return patch_planes(std::vector<int>(ranks.begin(), ranks.end()), o, *store, std::move(s), r);
  });
  model::StepStats total;
  SAL_TRY(patch_compute(p, total));
  // a step of train.eval_every validates again, over the groups up: the plan's plane is spent
  auto val = validates(p.step) ? validate_in_groups(p.step, p.damaged) : model::StepStats{};
  if (!val) return val.error();
  const int64_t computed = mono_ns();
  auto c = connecting.get();
  if (!c) return c.error().with_context("patch " + std::to_string(p.patch) + " of step " + std::to_string(p.step) + " data plane");
  spdlog::info("step {} patch {}: computed in {:.1f} ms, its data plane ready {:.1f} ms later ({})", p.step, p.patch,
               double(computed - t0) / 1e6, double(mono_ns() - computed) / 1e6,
               c->patch.standby ? "the standby plane, narrowed to " + std::to_string(p.ranks.size()) + " ranks" : "connected");
  std::shared_ptr<comm::Collectives> plane(comm::timed(std::move(c->patch.plane), waits_));
  if (!spent_plane_) spent_plane_ = std::atomic_load(&comm_);
  std::atomic_store(&comm_, plane);  // abort(), a later patch and degraded steps reach it
  plane_of_ = PlaneOf{plan_, {}};
  for (uint32_t r : p.ranks)
    if (r < plan_ranks_.size()) plane_of_.ranks.push_back(plan_ranks_[r]);
  last_patch_ = p;
  auto replicas = replicas_at(replicas_, p.ranks);
  auto out = finish_grouped(*plane, replicas, shared_experts(replicas), std::move(total), t0);
  if (!out) return out;
  out->val_ce_sum = val->ce_sum, out->val_tokens = val->tokens;
  if (!p.rejoin.empty()) SAL_TRY(rejoin_degraded(p, std::move(c->rejoin)));
  return out;
}

// Where this rank's group rejoins the degraded steps after patch `p` (StepPatch.rejoin): the options
// of the plane of its ranks left, under `prefix` (the patch's) and /rejoin-<group>; none otherwise.
// Fails where those ranks do not hold every expert, which the controller's word says they do.
Result<std::optional<comm::GlooOptions>> Trainer::rejoin_options(const wire::StepPatch& p, const std::string& prefix) const {
  const uint32_t g = role_.span.group;
  if (std::find(p.rejoin.begin(), p.rejoin.end(), g) == p.rejoin.end()) return std::optional<comm::GlooOptions>{};
  std::vector<uint32_t> up;
  for (uint32_t pos : p.ranks)
    if (pos >= role_.span.first && pos < role_.span.first + role_.span.count) up.push_back(pos);
  if (auto gap = plan::missing_expert(replicas_, up))
    return fail("patch ", p.patch, " of step ", p.step, " has group ", g, " rejoin the degraded steps, but its ",
                up.size(), " ranks left hold no replica of layer ", gap->first, " expert ", gap->second);
  auto me = std::find(up.begin(), up.end(), uint32_t(rank_));
  return std::optional{plane_options(int(me - up.begin()), int(up.size()), prefix + "/rejoin-" + std::to_string(g))};
}

// After patch `p` committed its step here: the degraded steps' arrangement (rejoined_role), and on
// a rank of a rejoining group, its plane (`rejoin`) as the group's, named by the compute's plan.
Status Trainer::rejoin_degraded(const wire::StepPatch& p, std::unique_ptr<comm::Collectives> rejoin) {
  degraded_role_ = rejoined_role(role_, replicas_, p.rejoin, p.ranks, rank_);
  if (!rejoin) return {};
  std::shared_ptr<comm::Collectives> held = std::atomic_load(&group_comm_);  // the compute's plan names it until set_plan
  std::atomic_store(&group_comm_, std::shared_ptr<comm::Collectives>(comm::timed(std::move(rejoin), waits_)));
  group_plane_of_ = {};  // never kept: a plan connects its groups' planes anew
  if (auto s = compute_->set_plan(compute_plan()); !s)
    return s.error().with_context("step " + std::to_string(p.step) + ": group " + std::to_string(role_.span.group) +
                                  " rejoining the degraded steps");
  spdlog::info("step {} patch {}: group {} computes on in the degraded steps with its {} rank(s) left (this one rank {} "
               "of them)", p.step, p.patch, role_.span.group, degraded_role_->span.count, degraded_role_->local_rank);
  return {};
}

// The patch a degraded step keeps: the last one this worker computed, under this plan, naming it.
Result<const wire::StepPatch*> Trainer::kept_patch(uint64_t step, KeptPatch kept) const {
  const auto& p = last_patch_;
  if (!p || p->step != kept.step || p->patch != kept.patch || p->plan != plan_)
    return fail("step ", step, " keeps patch ", kept.patch, " of step ", kept.step, " under plan ", plan_,
                ", which this worker did not compute (", p ? "its last: patch " + std::to_string(p->patch) + " of step " +
                std::to_string(p->step) : std::string("none under this plan"), ")");
  if (std::find(p->ranks.begin(), p->ranks.end(), uint32_t(rank_)) == p->ranks.end())
    return fail("step ", step, " keeps patch ", kept.patch, " of step ", kept.step, ", which does not name rank ", rank_);
  return &*p;
}

// The validation set once a patch has spent the plan's plane (a patched or degraded step): split
// over the groups up in proportion to their ranks, each group's part over its own plane; a rank of
// a damaged group evaluates nothing. The same sum as over the plan's plane, in another order.
Result<model::StepStats> Trainer::validate_in_groups(uint64_t step, const std::vector<uint32_t>& damaged) {
  if (std::find(damaged.begin(), damaged.end(), role_.span.group) != damaged.end()) return model::StepStats{};
  if (!std::atomic_load(&group_comm_)) return fail("plan ", plan_, ": no data plane for group ", role_.span.group);
  auto [first, count] = rank_part(groups_up_part(spec_.eval_sequences, role_, damaged), role_);
  model::Batch b = model::make_validation_batch(corpus_, spec_.seed, first, count, spec_.dims.seq_len);
  auto stats = compute_->evaluate_in_group(b, int64_t(spec_.eval_sequences) * spec_.dims.seq_len);
  if (!stats) return stats.error().with_context("step " + std::to_string(step) + " validation in group " +
                                                std::to_string(role_.span.group));
  return stats;
}

Result<StepOutcome> Trainer::degraded_step(uint64_t step, int64_t t0, const wire::StepPatch& p) {
  backup_ok_ = false;
  const uint32_t g = role_.span.group;
  std::vector<uint32_t> out;  // the damaged groups that do not rejoin (StepPatch.rejoin)
  for (uint32_t d : p.damaged)
    if (std::find(p.rejoin.begin(), p.rejoin.end(), d) == p.rejoin.end()) out.push_back(d);
  const bool dropped = std::find(out.begin(), out.end(), g) != out.end();
  auto plane = std::atomic_load(&comm_);
  if (!plane) return fail("step ", step, ": no data plane for patch ", p.patch, " of step ", p.step);
  model::StepStats total;
  faults_->at(wire::FaultPoint::forward, step);
  // a spreading patch's degraded steps: the batch evenly over the groups up, one pass each (no
  // copy set aside: a patch of this step runs this rank's own types again, then its spread parts)
  const auto even = p.spread.empty() ? std::pair{0, 0} : even_part(spec_.global_batch, role_now(), out);
  if (even.second > 0) {
    SAL_TRY(compute_part(step, sequences_text(even, "degraded"), even, total));
  } else if (!dropped) {
    SAL_TRY(compute_types(step, role_.types, total));
  } else {  // no pass of its own: a drill's kill at those points still finds it in the step
    faults_->at(wire::FaultPoint::alltoall, step);
    faults_->at(wire::FaultPoint::backward, step);
  }
  if (even.second == 0) {
    SAL_TRY(backup_grads());  // a patch of this step starts again from here: its extra types include the kept ones
    group_stats_ = total;
    SAL_TRY(compute_patch_types(step, p, total));
  }
  faults_->at(wire::FaultPoint::allreduce, step);
  auto replicas = replicas_at(replicas_, p.ranks);
  return finish_grouped(*plane, replicas, shared_experts(replicas), std::move(total), t0);
}

}  // namespace sal::runtime
