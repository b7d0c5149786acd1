// runner.cpp — see runner.h.
#include "drill/runner.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "core/clock.h"
#include "core/paths.h"
#include "core/strings.h"

namespace sal::drill {

constexpr uint64_t kTickMs = 20;

DrillRunner::DrillRunner(mesh::Controller& c, uv_loop_t* loop, DrillSpec spec, const job::DrillProgress* resumed)
    : c_(c), spec_(std::move(spec)), timer_(loop), fired_(spec_.actions.size(), false), rng_(spec_.seed) {
  if (!resumed) return;
  resumed_ = true;
  for (uint64_t i : resumed->fired)
    if (i < fired_.size()) fired_[i] = true;
  if (!resumed->fired.empty()) first_action_s_ = now_s();  // the throughput "before the drill" is gone
  // the clock's origin, moved to this controller's clock (a wall-clock interval)
  if (resumed->clock_wall_ms) origin_s_ = now_s() - double(wall_ms() - *resumed->clock_wall_ms) / 1e3;
}

DrillRunner::~DrillRunner() {
  timer_.stop();
  c_.on_committed = previous_hook_;
  c_.on_plan_sending = previous_plan_hook_;
}

double DrillRunner::now_s() const { return double(mono_ns() - c_.started_ns()) / 1e9; }

void DrillRunner::note(const std::string& kind, NodeId node, const std::string& detail) {
  c_.record_event(kind, node, detail);
  if (kind == "drill_error") spdlog::warn("drill {}: {}", spec_.name, detail);
  else spdlog::info("drill {}: {}", spec_.name, detail);
}

void DrillRunner::start() {
  previous_hook_ = c_.on_committed;
  c_.on_committed = [this](uint64_t step) {
    if (previous_hook_) previous_hook_(step);
    on_committed(step);
  };
  previous_plan_hook_ = c_.on_plan_sending;
  c_.on_plan_sending = [this](const wire::PlanUpdate& u) {
    if (previous_plan_hook_) previous_plan_hook_(u);
    on_plan_sending(u);
  };
  if (resumed_) {
    size_t ran = size_t(std::count(fired_.begin(), fired_.end(), true));
    note("drill", kNoNode, "drill '" + spec_.name + "' (" + spec_.file + ") goes on in the resumed controller: " +
                               std::to_string(ran) + " of " + std::to_string(spec_.actions.size()) + " actions ran before");
  } else {
    std::string what = std::to_string(spec_.actions.size()) + " actions";
    if (spec_.duration_s) what += ", " + std::to_string(int64_t(*spec_.duration_s)) + " s";
    if (spec_.trace_time_scale > 0) what += ", the trace at time_scale " + short_number(spec_.trace_time_scale);
    note("drill", kNoNode, "drill '" + spec_.name + "' (" + spec_.file + ") starts: " + what);
    if (auto s = c_.journal_now(job::rec::Drill{absolute_path(spec_.file), spec_.args}); !s)
      note("drill_error", kNoNode, "journal: " + s.error().message() + " (a resumed controller will not go on with this drill)");
  }
  if (spec_.clock_from_start && origin_s_ < 0) set_clock_origin(now_s());
  for (size_t i = 0; i < spec_.actions.size(); ++i)
    if (!fired_[i] && spec_.actions[i].step && *spec_.actions[i].step <= c_.steps().committed()) fire(i);
  timer_.start(kTickMs, kTickMs, [this] { tick(); });
}

void DrillRunner::set_clock_origin(double at_s) {
  origin_s_ = at_s;
  int64_t wall = wall_ms() - int64_t((now_s() - at_s) * 1e3);
  if (auto s = c_.journal_now(job::rec::DrillClock{wall}); !s) note("drill_error", kNoNode, "journal: " + s.error().message());
}

void DrillRunner::on_committed(uint64_t) {
  double t = now_s();
  if (first_step_s_ < 0) first_step_s_ = t;
  if (origin_s_ < 0) set_clock_origin(t);
  uint64_t tokens = c_.step_log().last() ? c_.step_log().last()->tokens : 0;
  all_tokens_ += tokens;
  all_last_s_ = t;
  if (first_action_s_ < 0) {
    if (pre_first_s_ < 0) pre_first_s_ = t;
    else pre_tokens_ += tokens;  // tokens per second between the first and the last pre-drill step
    pre_last_s_ = t;
  }
  uint64_t committed = c_.steps().committed();
  for (size_t i = 0; i < spec_.actions.size(); ++i)
    if (!fired_[i] && spec_.actions[i].step && *spec_.actions[i].step <= committed) fire(i);
}

// A kill during a migration: one of the nodes that send state in this switch (the chosen one, if
// the action names it) is armed to die at it, before it gets the plan.
void DrillRunner::on_plan_sending(const wire::PlanUpdate& u) {
  for (auto it = migration_kills_.begin(); it != migration_kills_.end();) {
    const Action& a = spec_.actions[*it];
    std::vector<wire::RankRef> senders;
    for (const auto& t : u.transfers)
      if (t.from < u.ranks.size() && (!a.node || u.ranks[t.from].node == *a.node)) senders.push_back(u.ranks[t.from]);
    if (senders.empty()) {
      ++it;
      continue;
    }
    auto victim = senders[std::uniform_int_distribution<size_t>(0, senders.size() - 1)(rng_)];
    Status s = c_.arm_fault(NodeId(victim.node), victim.index, wire::FaultPoint::migration, std::nullopt,
                            "drill " + spec_.name);
    note(s ? "drill" : "drill_error", NodeId(victim.node),
         a.describe() + " -> node " + std::to_string(victim.node) + ", which sends state in plan " + std::to_string(u.number()) +
             (s ? "" : ": " + s.error().message()));
    it = migration_kills_.erase(it);
  }
}

// Kills still owed (a random kill that found too few nodes), paid as nodes become ready.
void DrillRunner::pay_owed_kills() {
  while (!owed_kills_.empty()) {
    Owed& o = owed_kills_.front();
    Action want = spec_.actions[o.action];
    want.count = o.count;
    for (NodeId id : pick(want)) {
      Status s = c_.kill_node(id, "drill " + spec_.name);
      killed_.insert(id);
      note(s ? "drill" : "drill_error", id, want.describe() + " (owed) -> node " + std::to_string(id) + (s ? "" : ": " + s.error().message()));
      --o.count;
    }
    if (o.count > 0) return;
    owed_kills_.erase(owed_kills_.begin());
  }
}

// An add while kills are owed: the trace's count went down, then up again before the nodes it
// lost were there to kill; the add cancels up to `adds` owed kills, newest first. Returns how many.
uint32_t DrillRunner::cancel_owed_kills(uint32_t adds) {
  uint32_t cancelled = 0;
  while (cancelled < adds && !owed_kills_.empty()) {
    uint32_t n = std::min(adds - cancelled, owed_kills_.back().count);
    cancelled += n;
    if ((owed_kills_.back().count -= n) == 0) owed_kills_.pop_back();
  }
  return cancelled;
}

void DrillRunner::tick() {
  double origin = clock_origin_s();
  if (origin < 0 || stopped_) return;
  pay_owed_kills();
  double since = now_s() - origin;
  for (size_t i = 0; i < spec_.actions.size(); ++i)
    if (!fired_[i] && spec_.actions[i].at_s && *spec_.actions[i].at_s <= since) fire(i);
  if (spec_.duration_s && since >= *spec_.duration_s && !c_.stopping()) {
    stopped_ = true;
    note("drill", kNoNode, "drill over: " + std::to_string(int64_t(*spec_.duration_s)) +
                               (spec_.clock_from_start ? " s of its trace" : " s of training"));
    c_.request_stop("drill over after " + std::to_string(int64_t(*spec_.duration_s)) + " s");
  }
}

// Nodes that take part in training (live, with a ready worker), not killed by this drill already.
std::vector<NodeId> DrillRunner::pick(const Action& a) {
  if (a.node) return {NodeId(*a.node)};
  if (a.holders_of) return holders(*a.holders_of);
  if (!a.rack.empty()) return rack_nodes(a.rack);
  // a point inside a step can only be reached by a node that runs the steps: a rank of the plan in
  // force (a node that joined and waits for the next plan would never get there)
  std::set<NodeId> ranks;
  if (const auto& applied = c_.driver().applied(); applied && a.during)
    for (const auto& r : applied->ranks) ranks.insert(r.node);
  std::vector<NodeId> pool;
  for (const auto& [id, n] : c_.membership().nodes()) {
    if (!n.usable() || killed_.count(id) || (a.during && !ranks.count(id))) continue;
    if (std::any_of(n.workers.begin(), n.workers.end(),
                    [](const mesh::WorkerView& w) { return !w.exited && w.state == wire::WorkerState::ready; }))
      pool.push_back(id);
  }
  std::shuffle(pool.begin(), pool.end(), rng_);
  if (pool.size() > a.count) pool.resize(a.count);
  return pool;
}

// The live nodes whose names the job's mesh.racks puts in `rack`.
std::vector<NodeId> DrillRunner::rack_nodes(const std::string& rack) const {
  std::vector<NodeId> out;
  for (const auto& [id, n] : c_.membership().nodes())
    if (auto r = c_.racks().find(n.name); n.usable() && r != c_.racks().end() && r->second == rack) out.push_back(id);
  return out;
}

std::vector<NodeId> DrillRunner::holders(std::pair<int, int> unit) const {
  std::set<NodeId> out;
  const auto& applied = c_.driver().applied();
  if (!applied || unit.first < 0 || size_t(unit.first) >= applied->plan.layers.size()) return {};
  const auto& placement = applied->plan.layers[size_t(unit.first)].placement;
  for (size_t r = 0; r < placement.size() && r < applied->ranks.size(); ++r)
    if (std::count(placement[r].begin(), placement[r].end(), uint32_t(unit.second))) out.insert(applied->ranks[r].node);
  return {out.begin(), out.end()};
}

// The step a fault at `point` is armed for: the step that runs next; for a snapshot, the next
// dense snapshot (the one of the step just committed has gone out already).
Result<uint64_t> DrillRunner::fault_step(wire::FaultPoint point) const {
  uint64_t committed = c_.steps().committed();
  if (point != wire::FaultPoint::snapshot) return committed;
  int64_t every = c_.job().train.checkpoint_every;
  if (every <= 0) return fail("this job takes no dense snapshots (train.checkpoint_every = 0)");
  return (committed / uint64_t(every) + 1) * uint64_t(every);
}

// kill{controller = true}: the host kills this process; the fired action is in the journal
// already, so the resumed controller does not run it again.
void DrillRunner::kill_controller(const Action& a) {
  if (!c_.restart_controller)
    return note("drill_error", kNoNode, a.describe() + ": this controller has no host to restart it (a drill that kills "
                                                       "the controller runs with `salamander run --drill`, which hosts its "
                                                       "controller as a child process)");
  note("drill", kNoNode, a.describe());
  if (auto s = c_.restart_controller(a.restart_after_s); !s) note("drill_error", kNoNode, a.describe() + ": " + s.error().message());
}

// partition{}: the host cuts the node's link (the node is known to it by the name it registered with).
Status DrillRunner::partition(NodeId id, uint64_t ms) {
  if (!c_.partition_node)
    return fail("this mesh is not in network namespaces (a drill that cuts links runs with `salamander run --drill`, "
                "which puts the controller and every agent in a namespace of its own)");
  const mesh::Node* n = c_.membership().find(id);
  if (!n) return fail("no node ", id);
  return c_.partition_node(n->name, ms);
}

// Says why a pick found fewer nodes than action i asks for; a random kill owes the rest.
void DrillRunner::report_shortfall(size_t i, size_t found) {
  const Action& a = spec_.actions[i];
  if (a.holders_of && found == 0) return note("drill_error", kNoNode, a.describe() + ": no plan in force places that expert");
  if (!a.rack.empty() && found == 0)
    return note("drill_error", kNoNode,
                a.describe() + ": no live node is in that rack (mesh.racks = \"" + c_.job().mesh.racks + "\")");
  if (a.holders_of || !a.rack.empty() || found >= a.count) return;
  std::string only = a.describe() + ": only " + std::to_string(found) + " nodes to choose from";
  if (a.kind != ActionKind::kill || a.during || a.node) return note("drill_error", kNoNode, only);
  owed_kills_.push_back({i, a.count - uint32_t(found)});
  note("drill", kNoNode, only + "; " + std::to_string(a.count - found) + " more die as soon as nodes are ready");
}

void DrillRunner::fire(size_t i) {
  fired_[i] = true;
  const Action& a = spec_.actions[i];
  if (first_action_s_ < 0) first_action_s_ = now_s();
  if (auto s = c_.journal_now(job::rec::DrillFired{i}); !s) note("drill_error", kNoNode, "journal: " + s.error().message());
  if (a.controller) return kill_controller(a);
  std::string who = "drill " + spec_.name;
  if (a.kind == ActionKind::add) {
    uint32_t cancelled = cancel_owed_kills(a.count);
    std::string owed = cancelled ? " (cancels " + std::to_string(cancelled) + " kills still owed)" : "";
    if (cancelled == a.count) return note("drill", kNoNode, a.describe() + owed);
    Status s = c_.add_nodes ? c_.add_nodes(int(a.count - cancelled)) : Status(fail("this controller cannot start nodes"));
    return note(s ? "drill" : "drill_error", kNoNode, a.describe() + owed + (s ? "" : ": " + s.error().message()));
  }
  if (a.kind == ActionKind::kill && a.during == wire::FaultPoint::migration) {
    migration_kills_.push_back(i);
    return note("drill", kNoNode, a.describe() + ": armed for the next plan switch that moves state");
  }
  auto targets = pick(a);
  report_shortfall(i, targets.size());
  for (NodeId id : targets) {
    Status s;
    if (a.kind == ActionKind::kill && a.during) {
      const mesh::Node* n = c_.membership().find(id);
      auto step = fault_step(*a.during);
      const auto& applied = c_.driver().applied();
      if (n && step && applied &&
          std::none_of(applied->ranks.begin(), applied->ranks.end(), [id](const Participant& r) { return r.node == id; }))
        step = Result<uint64_t>(fail("node ", id, " is no rank of plan ", applied->number(),
                                     ": it runs no step, and would never reach that point"));
      for (const auto& w : n ? n->workers : std::vector<mesh::WorkerView>{})
        if (s) s = step ? c_.arm_fault(id, w.index, *a.during, *step, who) : Status(step.error());
      if (!n) s = fail("no node ", id);
    } else if (a.kind == ActionKind::kill) {
      s = c_.kill_node(id, who);
      killed_.insert(id);
    } else if (a.kind == ActionKind::crash) {
      s = c_.crash_workers(id, who);
    } else if (a.kind == ActionKind::drain) {
      s = c_.drain_node(id, who);
    } else if (a.kind == ActionKind::partition) {
      s = partition(id, a.ms);
    } else if (a.kind == ActionKind::slow) {
      s = c_.slow_node(id, a.factor, a.ms, who);
    } else if (a.kind == ActionKind::corrupt) {
      s = c_.arm_corruption(id, *a.unit, a.bits, c_.steps().committed(), who);
    } else {
      s = c_.freeze_node(id, a.ms, who);
    }
    note(s ? "drill" : "drill_error", id, a.describe() + " -> node " + std::to_string(id) + (s ? "" : ": " + s.error().message()));
  }
}

std::vector<ExpectationResult> DrillRunner::check() const {
  std::vector<ExpectationResult> out;
  const auto& rec = c_.record();
  const auto& e = spec_.expect;
  auto add = [&](std::string what, bool ok, std::string detail) { out.push_back({std::move(what), ok, std::move(detail)}); };
  size_t unfired = size_t(std::count(fired_.begin(), fired_.end(), false)) + migration_kills_.size();
  add("every scheduled action ran", unfired == 0,
      unfired == 0 ? std::to_string(fired_.size()) + " ran" : std::to_string(unfired) + " never ran (the job ended first)");
  if (e.lost_steps)
    add("lost_steps <= " + std::to_string(*e.lost_steps), rec.lost_steps() <= *e.lost_steps,
        std::to_string(rec.lost_steps()) + " committed steps lost");
  if (e.resume_s) {
    double worst = 0;
    for (const auto& r : rec.recoveries()) worst = std::max(worst, r.seconds);
    char buf[96];
    std::snprintf(buf, sizeof buf, "slowest of %zu recoveries: %.2f s", rec.recoveries().size(), worst);
    add("every recovery resumes within " + short_number(*e.resume_s) + " s", worst <= *e.resume_s, buf);
  }
  if (e.restores)
    add("restores == " + std::to_string(*e.restores), rec.restores() == *e.restores, std::to_string(rec.restores()) + " restores");
  if (e.min_restores)
    add("restores >= " + std::to_string(*e.min_restores), rec.restores() >= *e.min_restores,
        std::to_string(rec.restores()) + " restores");
  if (e.min_throughput_share) {
    double pre = pre_last_s_ > pre_first_s_ ? double(pre_tokens_) / (pre_last_s_ - pre_first_s_) : 0;
    double all = all_last_s_ > first_step_s_ ? double(all_tokens_) / (all_last_s_ - first_step_s_) : 0;
    double share = pre > 0 ? all / pre : 0;
    char buf[160];
    std::snprintf(buf, sizeof buf, "%.0f tokens/s over the drill, %.0f before its first action: %.2f", all, pre, share);
    add("throughput share >= " + short_number(*e.min_throughput_share), share >= *e.min_throughput_share, buf);
  }
  return out;
}

nlohmann::ordered_json DrillRunner::status() const {
  nlohmann::ordered_json j;
  j["name"] = spec_.name;
  j["file"] = spec_.file;
  j["actions"] = spec_.actions.size();
  j["fired"] = size_t(std::count(fired_.begin(), fired_.end(), true));
  j["training_s"] = first_step_s_ < 0 ? 0.0 : now_s() - first_step_s_;
  j["clock_s"] = clock_origin_s() < 0 ? 0.0 : now_s() - clock_origin_s();
  auto pending = nlohmann::json::array();
  for (size_t i = 0; i < spec_.actions.size() && pending.size() < 10; ++i)
    if (!fired_[i]) pending.push_back(spec_.actions[i].describe());
  j["next"] = pending;
  return j;
}

}  // namespace sal::drill
