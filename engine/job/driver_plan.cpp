// driver_plan.cpp — the job driver's planning phases (see driver.h, driver_phases.h): deciding
// (which workers the next plan uses, the planner asked and answered), switching (the PlanUpdate
// sent, every rank's PlanReady awaited, the plan put in force or failed) and retrying (the pause
// after a failed plan or an aborted step).
#include <algorithm>

#include "ckpt/slice_store.h"
#include "core/strings.h"
#include "job/driver.h"
#include "plan/domains.h"
#include "plan/fixed_ep.h"
#include "plan/snapshot_peers.h"

namespace sal::job {

// How long every participant has to connect a new plan's data plane and move its state.
constexpr uint64_t kPlanTimeoutMs = 60000;
// A failed plan is tried again after this pause, doubled after each failure in a row up to 16x
// (deaths that caused it get noticed meanwhile, and a worker still stuck connecting an abandoned
// plan's data plane gets time to give up).
constexpr uint64_t kPlanRetryMs = 200;
constexpr int kPlanRetryDoublings = 4;
// Steps failing this many times in a row with the same workers end the job; plans, a few more
// (a plan's rendezvous can time out behind a worker still leaving an abandoned one).
constexpr int kMaxConsecutiveFailures = 3;
constexpr int kMaxConsecutivePlanFailures = 5;
// The agents report the sparse windows they hold at most every 100 ms (mesh/slice_server.h), once
// a window's last slot has come: a restore that would go to disk or the seed waits for them until
// this long after the last commit (the windows are made by commits) — no longer, however late the
// loss (Driver::settle_deadline).
constexpr int64_t kReportSettleMs = 150;
// The longest wait for the window the last commit completed, where waiting costs less than the step
// its restore saves: its slots still on their way to the agents (a large model's take longer than
// kReportSettleMs), or never to come whole (a writer lost with them).
constexpr int64_t kNewestWindowWaitMs = 300;

// ---------- planning: deciding ----------

WorkerChoice Driver::choose(const std::vector<Participant>& ready, uint64_t step) const {
  uint32_t ep = plan::ep_size(uint32_t(cfg_.model.experts), cfg_.slots);
  Restorable have;
  if (snapshots_ && snapshots_->latest()) have.dense_step = snapshots_->latest()->step;
  have.sparse_to = [this, step] {
    auto w = peer_window(step);
    return w ? std::optional<uint64_t>(w->to) : std::nullopt;
  };
  have.rebuild = [this, &ready](const std::vector<std::string>& lost) { return can_rebuild(lost, ready); };
  auto c = choose_workers(cfg_.recovery, ep, ready, applied_, step, have);
  if (auto units = unrepairable(); !units.empty() && !c.restore() && !c.use.empty()) {
    // copies whose digests disagreed with no majority's copy to take: only a restore is sure
    c.rung = restore_rung(units, have);
    c.why = "no copy of " + units.front() + " can be told good (digests)";
  }
  if (restore_owed_ && !c.restore() && !c.use.empty()) {
    c.rung = forced_restore(have);
    c.why = *restore_owed_;
  }
  if (replaying() && !c.restore() && !c.use.empty()) {
    // frozen operators have no optimizer state to move, and new holders no later slots to load
    c.rung = restore_rung({"the replay"}, have);
    c.why = "the replay of the sparse window (to iteration " + std::to_string(*peers_.replay_to()) + ") was interrupted";
  }
  return c;
}

// The newest window the live agents hold complete, of the iterations before `committed` — or
// before the steps committed when a sparse restore began, if one failed since: its rewind is no
// step back for the windows the job had reached (a retry may take them).
std::optional<PeerWindow> Driver::peer_window(uint64_t committed) const {
  std::set<NodeId> live;
  for (const auto& [node, sn] : view_.slices) live.insert(node);
  return peers_.restorable(live, std::max(committed, peers_.replaced()));
}

void Driver::add_slice_peers(wire::PlanUpdate& u) const {
  u.slice_budget = cfg_.peer_memory;
  if (cfg_.peer_copies == 0) return;
  for (const auto& [node, sn] : view_.slices) u.slice_nodes.push_back(sn);
  std::vector<uint32_t> node_of_rank;
  for (const auto& r : u.ranks) node_of_rank.push_back(r.node);
  u.slice_peers = slice_peers(node_of_rank, u.plan);
}

std::vector<wire::SlicePeers> Driver::slice_peers(const std::vector<uint32_t>& node_of_rank, const plan::Plan& plan,
                                                  const std::vector<uint32_t>& lost) const {
  std::vector<wire::SlicePeers> out;
  if (cfg_.peer_copies == 0 || !sparse_not_taken(plan).empty()) return out;
  std::map<uint32_t, std::string> rack_of_node;
  for (const auto& [node, rack] : view_.racks) rack_of_node[uint32_t(node)] = rack;
  for (auto& nodes : plan::snapshot_peers(plan, node_of_rank, cfg_.peer_copies, rack_of_node, lost)) {
    std::erase_if(nodes, [&](uint32_t n) { return !view_.slices.count(NodeId(n)); });
    out.push_back({std::move(nodes)});
  }
  return out;
}

std::string Driver::sparse_not_taken(const plan::Plan& plan) const {
  if (cfg_.peer_copies == 0) return "";
  return plan::sparse_not_taken(plan.schedule, cfg_.checkpoint_every, cfg_.expert_logs);
}

void Driver::note_sparse_taken(const plan::Plan& plan) {
  if (cfg_.peer_copies == 0) return;
  std::string off = sparse_not_taken(plan);
  if (sparse_off_ == off) return;
  const bool first = !sparse_off_;
  sparse_off_ = off;
  if (!off.empty())
    note("sparse_snapshots", "plan " + std::to_string(plan.version) + ": no sparse snapshots taken: " + off +
                                 "; taken again by a plan whose window comes out ahead, or with train.expert_logs");
  else if (!first)
    note("sparse_snapshots", "plan " + std::to_string(plan.version) + ": sparse snapshots taken again (window " +
                                 std::to_string(plan.schedule.window) + ")");
}

// Asks the planner for a plan over the workers the recovery mode uses now. `with_loads`: balanced
// on the measured loads (a rebalance; a request may ask too); `keep`: the plan in force again (a
// resumed job whose ranks all came back).
Driver::Next Driver::start_plan(std::string why, bool with_loads, bool keep) {
  cancel(Timer::retry);
  cancel(Timer::plan);
  // with no worker left after a plan was in force, the wait for capacity is on (and ends the job)
  if (view_.ready.empty())
    return applied_ ? cannot_plan("no workers left", why + ": no workers left") : Next(phase::Gathering{});
  drop_snapshots_of_lost();
  with_loads = with_loads || (wanted_ && wanted_->with_loads);
  wanted_.reset();
  const uint64_t step = steps_.committed();
  auto choice = choose(view_.ready, step);
  if (choice.use.empty()) return cannot_plan(choice.why, why + ": " + choice.why);
  phase::Deciding d{++decisions_, why, choice, step, view_.epoch, plane_spent_};
  act::DecidePlan ask;
  ask.decision = d.decision;
  ask.workers = uint32_t(choice.use.size());
  ask.epoch = view_.epoch;
  if (with_loads && !measured_.loads().empty()) {
    ask.loads = measured_.loads().mean();
    ask.step_loads = measured_.loads().recent(policy::kPlacementSteps);
  }
  ask.facts = measured_.facts();
  ask.facts.iteration = step;
  if (keep) ask.keep = applied_->plan;
  ask.held = held_by(applied_, choice.use);
  ask.domains = host_labels(choice.use);
  ask.racks = rack_labels(choice.use, view_.racks);
  if (cfg_.recovery != "elastic")
    ask.fixed_groups = uint32_t(choice.use.size()) / plan::ep_size(uint32_t(cfg_.model.experts), cfg_.slots);
  out_.push_back(std::move(ask));
  return d;
}

// No plan can be made with the workers there are: back to gathering, said once for as long as the
// reason stays the same (planning is tried again whenever the workers change, and only more
// workers can unblock it). The wait for capacity starts here; the job ends when it has lasted
// mesh.capacity_wait_ms.
Driver::Next Driver::cannot_plan(const std::string& why, const std::string& detail) {
  note("plan_failed", detail, act::Level::info, true);
  const bool waiting = streak_.cannot_plan_since_ns != 0;
  if (!waiting) {
    streak_.cannot_plan_since_ns = now_ns_;
    if (cfg_.capacity_wait_ms > 0) arm(Timer::capacity, uint64_t(cfg_.capacity_wait_ms));
  }
  if (why != streak_.cannot_plan) {
    streak_.cannot_plan = why;
    std::string until = waiting ? " (waiting for " + ms_text(now_ns_ - streak_.cannot_plan_since_ns) + " so far)"
                        : cfg_.capacity_wait_ms > 0 ? "; the job ends if none can be made within " + ms_text(cfg_.capacity_wait_ms * 1'000'000)
                                                    : "";
    note("capacity_wait", "no plan can be made (" + why + "); waiting for more workers to join" + until, act::Level::warn);
  }
  return phase::Gathering{};
}

// A plan could be made again: the wait for capacity is over, and the recovery it was part of
// counts it apart from the engine's own time.
void Driver::capacity_back() {
  if (!streak_.cannot_plan_since_ns) return;
  cancel(Timer::capacity);
  int64_t waited = now_ns_ - streak_.cannot_plan_since_ns;
  if (recovery_) recovery_->capacity_ns += std::min(waited, now_ns_ - recovery_->since_ns);
  note("capacity_back", "a plan can be made again after " + ms_text(waited) + " waiting for workers (" +
                            streak_.cannot_plan + ")");
  streak_.cannot_plan_since_ns = 0;
  streak_.cannot_plan.clear();
}

Driver::Next Driver::on_capacity_timeout(const Event&) {
  // (the timer is the deadline: the clock may read a hair less when it fires)
  return fail_job("no plan could be made for " + ms_text(cfg_.capacity_wait_ms * 1'000'000) + " (" + streak_.cannot_plan +
                  "): mesh.capacity_wait_ms ends the job then (0: it waits for workers without end)");
}

Driver::Next Driver::on_view(const Event&) { return std::nullopt; }

Driver::Next Driver::on_decided(const Event& e) {
  const auto& d = std::get<in::Decided>(e);
  const auto& deciding = std::get<phase::Deciding>(state_);
  if (d.decision != deciding.decision) return std::nullopt;  // superseded
  if (!d.record)
    return cannot_plan(std::to_string(deciding.choice.use.size()) + " workers: " + d.record.error().message(),
                       deciding.why + ": " + d.record.error().message());
  // Workers lost while the policies decided: the decision is for workers that are gone.
  for (const auto& w : deciding.choice.use)
    if (!contains(view_.ready, w)) return start_plan("again: worker " + participant_name(w) + " left while the plan was decided");
  capacity_back();
  return plan_decided(deciding, *d.record);
}

// ", stacks by spare gen 1: 3 of 4 groups up, depth 2" for a plan of data-parallel groups.
std::string Driver::stacks_text(const PlanRecord& rec) {
  const uint32_t G = plan::group_count(rec.plan);
  if (G <= 1) return "";
  uint32_t up = 0;
  for (uint32_t n : rec.plan.groups) up += n > 0;
  return ", stacks by " + rec.redundancy_by + ": " + std::to_string(up) + " of " + std::to_string(G) + " groups up, depth " +
         std::to_string(rec.plan.stacks.depth());
}

// ", its groups in the order 0, 2, 1, 3 (...)" when arrange_groups reordered them.
std::string Driver::arranged_text(const Arranged& a) {
  if (a.order.empty()) return "";
  std::vector<std::string> order;
  for (uint32_t g : a.order) order.push_back(std::to_string(g));
  return "; its groups in the order " + join(order, ", ") + " (the data planes of groups that survived whole are kept)";
}

Driver::Next Driver::plan_decided(const phase::Deciding& d, const PlanRecord& decided) {
  uint64_t number = decided.plan.version;
  const auto& use = d.choice.use;
  Arranged arranged = arrange_groups(applied_, use, decided.plan);
  PlanRecord rec = decided;
  rec.plan = std::move(arranged.plan);
  const std::string hosts = plan::on_hosts(rec.plan);
  note("plan", "plan " + std::to_string(number) + " for " + std::to_string(use.size()) + " workers" + hosts + " (" + d.why +
                   "): allocation by " + rec.allocation_by + ", placement by " + rec.placement_by + stacks_text(rec) +
                   arranged_text(arranged) + (rec.note.empty() ? "" : "; " + rec.note),
       act::Level::info, true);
  if (rec.plan.floor < cfg_.min_replicas && cfg_.recovery == "elastic") {
    std::string detail = "plan " + std::to_string(number) + " guarantees " + std::to_string(rec.plan.floor) +
                         " replicas per expert, below policies.min_replicas = " + std::to_string(cfg_.min_replicas) +
                         " (" + std::to_string(use.size()) + " workers x " + std::to_string(cfg_.slots) + " slots)" +
                         (rec.floor_note.empty() ? "" : ": " + rec.floor_note);
    note("floor_lowered", detail, act::Level::warn);
  }
  if (cfg_.resume_from && !applied_) return start_resume(rec, d);
  if (d.choice.restore()) return start_restore(rec, d.choice);
  auto sw = switch_plan(applied_, use, rec.plan, d.step);
  if (!sw) return fail_job("plan " + std::to_string(number) + ": " + sw.error().message());
  if (!add_pending_repairs(*sw, rec.plan, number)) return start_plan("again: the copies whose digests disagreed");
  // Kept only when nothing would change: the same ranks, placement, checkpoint schedule and stacks
  // (a new schedule alone, say from another checkpoint policy, is put in force).
  if (!d.must_switch && applied_ && applied_->ranks == sw->ranks && plan::same_placement(applied_->plan, rec.plan) &&
      applied_->plan.schedule == rec.plan.schedule && applied_->plan.stacks == rec.plan.stacks) {
    note("plan_kept", "plan " + std::to_string(number) + " places every expert as plan " +
                          std::to_string(applied_->number()) + " does, with its checkpoint schedule and stacks; plan " +
                          std::to_string(applied_->number()) + " stays",
         act::Level::info, true);
    applied_->from_step = d.step;
    return in_force();
  }
  phase::Switching p{number, d.step, sw->ranks, rec.plan, *sw, {}, d.why, now_ns_};
  return begin_switch(std::move(p), plan_update(d.epoch, d.step, *sw, rec.plan));
}

// ---------- planning: switching ----------

Driver::Next Driver::begin_switch(phase::Switching p, wire::PlanUpdate u) {
  add_slice_peers(u);
  note_sparse_taken(u.plan);
  u.keep_planes_of = planes_intact_ && applied_ ? applied_->number() : 0;
  p.waiting.insert(p.ranks.begin(), p.ranks.end());
  send(p.ranks, std::move(u));
  arm(Timer::plan, kPlanTimeoutMs);
  return p;
}

// A pending plan whose ranks are not all still ready can never complete.
Driver::Next Driver::on_switch_view(const Event&) {
  auto& p = std::get<phase::Switching>(state_);
  for (const auto& r : p.ranks)
    if (!contains(view_.ready, r)) return plan_failed(p, "worker " + participant_name(r) + " left", true);
  return std::nullopt;
}

Driver::Next Driver::on_ready(const Event& e) {
  const auto& r = std::get<in::Ready>(e).ready;
  auto& p = std::get<phase::Switching>(state_);
  if (r.plan != p.number) return std::nullopt;  // an abandoned plan's late answer
  Participant who{r.node_id, r.index};
  if (!p.waiting.count(who)) return std::nullopt;
  for (const auto& n : r.notes) note("slice_fallback", "worker " + participant_name(who) + ": " + n, act::Level::warn);
  if (!r.ok) {
    p.snapshot_unreadable = r.snapshot_unreadable;
    return plan_failed(p, "worker " + participant_name(who) + ": " + r.detail);
  }
  p.waiting.erase(who);
  p.slowest_connect_ms = std::max(p.slowest_connect_ms, r.connect_ms);
  p.slowest_migrate_ms = std::max(p.slowest_migrate_ms, r.migrate_ms);
  if (auto rank = std::find(p.ranks.begin(), p.ranks.end(), who); rank != p.ranks.end() && r.migrate_ms > 0) {
    const Received got = received_by(p.sw, uint32_t(rank - p.ranks.begin()));
    if (got.experts > 0 && !got.dense) p.fetch_s.push_back(r.migrate_ms / 1e3 / double(got.experts));
  }
  if (!p.waiting.empty()) return std::nullopt;
  return plan_applied(p);
}

Driver::Next Driver::on_switch_timeout(const Event&) {
  return plan_failed(std::get<phase::Switching>(state_),
                     "not every worker connected and moved its state within " + std::to_string(kPlanTimeoutMs) + " ms");
}

Driver::Next Driver::plan_applied(phase::Switching& p) {
  cancel(Timer::plan);
  uint64_t previous = applied_ ? applied_->number() : 0;
  applied_ = AppliedPlan{p.ranks, p.plan, p.step};
  plane_spent_ = false;
  planes_intact_ = true;
  rebuild_failed_ = false;
  restore_owed_.reset();
  repairs_applied(p);
  peers_.plan_applied(p.restore == Rung::sparse && p.restore_window ? p.restore_to : std::nullopt);
  streak_.cannot_plan.clear();
  out_.push_back(act::Journal{rec::Plan{*applied_}, true});
  std::string detail = "plan " + std::to_string(p.number) + " in force from step " + std::to_string(p.step) + " on " +
                       std::to_string(p.ranks.size()) + " workers: " + std::to_string(p.sw.experts_moved) +
                       " expert replicas moved, " + std::to_string(p.sw.experts_kept) + " kept, " +
                       std::to_string(p.sw.dense_moved) + " dense units sent to new workers; " +
                       ms_text(now_ns_ - p.started_ns) + " (slowest worker: connect " +
                       std::to_string(int64_t(p.slowest_connect_ms)) + " ms, migrate " +
                       std::to_string(int64_t(p.slowest_migrate_ms)) + " ms)";
  note("plan_applied", detail);
  recovery_computing();
  measured_.switched(double(now_ns_ - p.started_ns) / 1e9);
  measured_.fetched(p.fetch_s);
  if (p.restore) {
    std::string restored = "restored " + p.restore_from + " on " + std::to_string(p.ranks.size()) + " workers in " +
                           ms_text(now_ns_ - p.started_ns) + "; training goes on from step " + std::to_string(p.step);
    note("restored", restored);
    out_.push_back(act::Restored{});
  }
  out_.push_back(act::PlanInForce{*applied_, measured_.loads().empty() ? std::vector<std::vector<double>>{}
                                                                        : measured_.loads().mean()});
  if (previous) out_.push_back(act::EraseKeys{previous, true});
  out_.push_back(act::EraseKeys{p.number});  // every rank has connected: the rendezvous keys are done with
  streak_.plans = 0;
  return in_force();
}

// Its ranks leave it at once (StepAbort names it) and its rendezvous is closed. A rank that left is
// out of the view already: when every unit still has a holder the next plan is asked for at once,
// without it; a plan that must restore waits kReportSettleMs where a report still on its way may
// show a newer sparse window (windows_may_serve: the restore takes the newest), else is asked for
// at once too. A restore from a sparse window that failed (most often a window its holders no
// longer keep: their reports were up to 100 ms old) tries the next window once the reports have
// settled, kReportSettleMs; the failed window is not tried again, so this ends. Any other failure
// waits a pause that doubles with each failure in a row.
Driver::Next Driver::plan_failed(phase::Switching& p, const std::string& why, bool membership) {
  if (!membership && p.restore == Rung::sparse) sparse_restore_failed(p, why);
  if (!membership && p.restore == Rung::rebuild) rebuild_failed(p, why);
  if (!membership && p.restore == Rung::dense) dense_restore_failed(p, why);
  if (p.restore == Rung::dense || p.restore == Rung::seed)
    restore_owed_ = "the restore of plan " + std::to_string(p.number) + " was not completed (" + why + ")";
  cancel(Timer::plan);
  std::string detail = "plan " + std::to_string(p.number) + " not applied: " + why;
  note("plan_failed", detail, act::Level::warn);
  abort_ranks(p.ranks, p.step, detail, p.number);
  out_.push_back(act::EraseKeys{p.number, true});
  plane_spent_ = true;  // the ranks may have let go of the plan in force's data plane already
  planes_intact_ = false;
  if (membership) {
    recovery_begins(detail);
    const auto until = settle_deadline();
    if (!choose(view_.ready, steps_.committed()).restore() || !until) return start_plan("again after: " + why);
    return settle_reports("again after: " + why, *until);
  }
  if (++streak_.plans >= kMaxConsecutivePlanFailures)
    return fail_job(std::to_string(streak_.plans) + " plans in a row could not be applied; the last: " + why);
  const bool next_window = p.restore == Rung::sparse;
  arm(Timer::retry, next_window ? kReportSettleMs : kPlanRetryMs << std::min(streak_.plans, kPlanRetryDoublings));
  return phase::Retrying{false, why, {}, 0, {}};
}

// ---------- planning: retrying ----------

Driver::Next Driver::on_retry(const Event&) { return retry(std::move(std::get<phase::Retrying>(state_))); }

// The pause after an aborted step ends once a rank of that step is seen gone: the cause is known,
// and a plan made now cannot include it.
Driver::Next Driver::on_retry_view(const Event&) { return cause_seen(std::get<phase::Retrying>(state_)); }

Driver::Next Driver::cause_seen(phase::Retrying& r) {
  if (!r.after_abort) return std::nullopt;
  // The digests said why (driver_digests.cpp): a repair waits for nothing. A restore does wait the
  // pause: the agents' reports of the sparse windows they hold settle, so it takes the newest.
  if (!repairs_.empty() && unrepairable().empty()) {
    cancel(Timer::retry);
    return retry(std::move(r));
  }
  for (const auto& w : r.lost)
    if (contains(view_.ready, w)) return std::nullopt;
  for (const auto& w : r.ranks)
    if (!contains(view_.ready, w)) {
      if (r.settling) return std::nullopt;
      cancel(Timer::retry);
      if (auto until = settle_deadline()) {  // the reports of the windows held may be up to 100 ms old
        r.settling = true;
        arm(Timer::retry, ms_until(*until));
        return std::nullopt;
      }
      return retry(std::move(r));
    }
  return std::nullopt;
}

// Whether the plan the job would make now restores from disk or the seed while sparse windows are
// kept in the agents' memory: a report still on its way may show one that serves. Or from a window
// the agents have likely dropped since they reported it: each keeps a writer's kWindowsKept newest
// complete windows (windows begin every `period` iterations), and training went on after the
// report; restoring it would fail, and the try cost a plan switch. The same for the rebuild rung,
// which copies the lost experts from such a window (seen in t0555 at 7 ms steps: the reports named
// a window two periods older than the newest, its holder had dropped it, and the rebuild fell back
// to the sparse rung). Or from a window older than the one the last commit completed, whose report
// is not in yet (next_window_due). Not while the plan in force takes no sparse snapshots
// (sparse_not_taken): no report can then show a window newer than those seen.
//
// Only while the reports may still be on their way: a window is made by a commit, and its report
// comes within kReportSettleMs of it. In a cascade of losses (no commit between them: one recovery)
// the second loss and those after it found the reports settled long since, and each paused 150 ms
// for nothing (P3's opening cascade: three of its four switches began 150 ms after their loss).
bool Driver::windows_may_serve() const { return settle_deadline().has_value(); }

// Until when a restore waits for the agents' reports (windows_may_serve); none: it plans now.
std::optional<int64_t> Driver::settle_deadline() const {
  if (cfg_.recovery != "elastic" || cfg_.peer_copies == 0) return std::nullopt;
  if (applied_ && !sparse_not_taken(applied_->plan).empty()) return std::nullopt;
  const int64_t settled = last_commit_ns_ + kReportSettleMs * 1'000'000;
  const auto by = [this](int64_t t) { return now_ns_ < t ? std::optional<int64_t>(t) : std::nullopt; };
  const uint64_t committed = steps_.committed();
  const Rung rung = choose(view_.ready, committed).rung;
  if (rung == Rung::dense || rung == Rung::seed) return by(settled);
  if ((rung != Rung::sparse && rung != Rung::rebuild) || !applied_) return std::nullopt;
  const auto w = peer_window(committed);
  if (!w) return std::nullopt;
  const uint64_t period = std::max<uint64_t>(applied_->plan.schedule.period, 1);
  if (w->from + (ckpt::SliceStore::kWindowsKept + 1) * period <= committed) return by(settled);
  if (!next_window_due(*w, committed)) return std::nullopt;
  const double step_ms = measured_.facts().iteration_s * 1e3;
  return by(last_commit_ns_ + int64_t(std::min(step_ms, double(kNewestWindowWaitMs)) * 1e6));
}

// Whether the last commit completed the window after `w` (windows begin every `period` iterations
// and hold `window`), whose report is not in yet: waiting for it costs less than the step its
// restore would not run again, up to kNewestWindowWaitMs after the commit (P3: a restore from window
// 121 ran step 122 again, 0.5 s at four workers, where the report of window 122 was due within 0.1 s).
// A restore from a window of the very step the survivors hold also moves less (restore_from_peers).
bool Driver::next_window_due(const PeerWindow& w, uint64_t committed) const {
  const auto& schedule = applied_->plan.schedule;
  const uint64_t period = std::max<uint64_t>(schedule.period, 1), width = std::max<uint64_t>(schedule.window, 1);
  return committed > 0 && w.from + period + width - 1 == committed - 1;
}

// Workers lost between steps (seen at a boundary, no step in flight to abort) when the plan made
// now could restore an older window or the seed than the agents' next reports offer: the pause
// for them first, as after an abort.
Driver::Next Driver::settle_reports(const std::string& why, int64_t until) {
  arm(Timer::retry, ms_until(until));
  return phase::Retrying{false, why, {}, 0, {}, true};
}

// The pause until `until` (a settle_deadline()), at least 1 ms.
uint64_t Driver::ms_until(int64_t until) const {
  return uint64_t(std::max<int64_t>(1, (until - now_ns_ + 999'999) / 1'000'000));
}

// A commit (or the driver's first event: a resumed job's agents report what they hold as they
// register) makes windows whose reports come after it.
void Driver::windows_made_now() { last_commit_ns_ = now_ns_; }

// A report during the pause for the reports: the pause ends as soon as the plan made now would
// wait no longer (the newest window came).
Driver::Next Driver::on_settling_slices(const Event& e) {
  on_slices(e);
  auto& r = std::get<phase::Retrying>(state_);
  if (!r.settling || windows_may_serve()) return std::nullopt;
  cancel(Timer::retry);
  return retry(std::move(r));
}

Driver::Next Driver::retry(phase::Retrying r) {
  if (!r.after_abort) return start_plan(r.settling ? r.why : "again after: " + r.why);
  // A step that failed because a worker left (noticed by now) is not the step's fault: only
  // failures with the same workers count towards ending the job.
  streak_.steps = view_.ready == r.ranks ? streak_.steps + 1 : 0;
  if (streak_.steps >= kMaxConsecutiveFailures)
    return fail_job("step " + std::to_string(r.step) + " failed " + std::to_string(streak_.steps) +
                    " times in a row with the same workers; the last: " + r.why);
  return start_plan("step aborted: " + r.why, false, repair_keeps_plan());
}

}  // namespace sal::job
