// training_api.cpp — the training half of the `job` module (the job driver's state): job.metrics(), job.loads(),
// job.rebalance(), job.checkpoint(), job.stacks(), job.training(). Registered like the rest of the REPL API (help and completion
// come from these entries).
#include <lua.hpp>

#include <cmath>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "lua/convert.h"
#include "mesh/controller.h"
#include "policy/planner.h"
#include "console/repl_eval.h"
#include "console/repl_server.h"

namespace sal::console {

using job::StepRecord;
namespace {

void push_record(lua_State* L, const StepRecord& r) {
  lua_newtable(L);
  lua::set_field(L, "step", int64_t(r.step));
  lua::set_field(L, "loss", r.loss);
  lua::set_field(L, "ce", r.ce);
  lua::set_field(L, "aux", r.aux);
  lua::set_field(L, "grad_norm", r.grad_norm);
  lua::set_field(L, "lr", r.lr);
  lua::set_field(L, "tokens", int64_t(r.tokens));
  lua::set_field(L, "step_ms", r.step_ms);
  lua::set_field(L, "compute_ms", r.compute_ms);
  lua::set_field(L, "tokens_per_s", r.tokens_per_s);
  lua::set_field(L, "workers", int64_t(r.workers));
  lua::set_field(L, "plan", int64_t(r.plan));
  lua::set_field(L, "time_s", r.time_s);
  lua::set_field(L, "imbalance", r.imbalance);
  if (!std::isnan(r.val_loss)) lua::set_field(L, "val_loss", r.val_loss);
}

int job_metrics(Controller& c, lua_State* L) {
  int64_t n = lua_isnoneornil(L, 1) ? 20 : lua::check_integer(L, 1, "job.metrics", "a count");
  const auto& m = c.step_log();
  const auto& recent = m.recent();
  size_t start = recent.size() > size_t(std::max<int64_t>(n, 0)) ? recent.size() - size_t(n) : 0;
  lua_newtable(L);
  lua::set_field(L, "steps", int64_t(m.count()));
  if (m.first()) lua::set_field(L, "first_loss", m.first()->loss);
  if (m.last()) lua::set_field(L, "loss", m.last()->loss);
  lua::set_field(L, "tokens_per_s", m.tokens_per_s());
  lua::set_field(L, "recent_tokens_per_s", m.recent_tokens_per_s(20));
  lua_newtable(L);
  int k = 1;
  for (size_t i = start; i < recent.size(); ++i) {
    push_record(L, recent[i]);
    lua_rawseti(L, -2, k++);
  }
  lua_setfield(L, -2, "recent");
  return 1;
}

void push_row(lua_State* L, const std::vector<double>& row) {
  lua_createtable(L, int(row.size()), 0);
  for (size_t e = 0; e < row.size(); ++e) {
    lua_pushnumber(L, row[e]);
    lua_rawseti(L, -2, int(e + 1));
  }
}

int job_loads(Controller& c, lua_State* L) {
  const auto& w = c.driver().loads();
  auto mean = w.mean();
  bool one = !lua_isnoneornil(L, 1);
  int64_t layer = one ? lua::check_integer(L, 1, "job.loads", "a layer (0-based)") : 0;
  if (one && (layer < 0 || layer >= int64_t(mean.size())))
    return luaL_error(L, "job.loads: layer %d is not in 0..%d", int(layer), int(mean.size()) - 1);
  lua_newtable(L);
  lua::set_field(L, "steps", int64_t(w.steps()));
  if (one) {
    push_row(L, mean[size_t(layer)]);
    lua_setfield(L, -2, "experts");
    return 1;
  }
  lua_createtable(L, int(mean.size()), 0);
  for (size_t l = 0; l < mean.size(); ++l) {
    push_row(L, mean[l]);
    lua_rawseti(L, -2, int(l + 1));
  }
  lua_setfield(L, -2, "layers");
  return 1;
}

int job_rebalance(Controller& c, lua_State* L) {
  c.request_plan("job.rebalance() by " + caller(L), true);
  lua_pushboolean(L, 1);
  return 1;
}

int job_training(Controller& c, lua_State* L) {
  const auto& t = c.driver();
  lua_newtable(L);
  lua::set_field(L, "phase", job::phase_name(t.phase()));
  if (const auto& a = t.applied()) {
    lua::set_field(L, "plan", int64_t(a->number()));
    lua::set_field(L, "plan_from_step", int64_t(a->from_step));
    lua_createtable(L, int(a->ranks.size()), 0);
    for (size_t r = 0; r < a->ranks.size(); ++r) {
      lua_pushstring(L, (std::to_string(a->ranks[r].node) + "." + std::to_string(a->ranks[r].index)).c_str());
      lua_rawseti(L, -2, int(r + 1));
    }
    lua_setfield(L, -2, "ranks");
  }
  if (!t.failure().empty()) lua::set_field(L, "failure", t.failure());
  if (!t.checkpoint_dir().empty()) lua::set_field(L, "checkpoint", t.checkpoint_dir());
  lua::set_field(L, "store", c.store_endpoint());
  return 1;
}

std::string slice_unit_name(const wire::SliceUnitRef& u) { return UnitId{UnitKind(u.kind), u.layer, u.expert}.name(); }

// What the live agents hold of the sparse snapshots: per agent its bytes, budget, refusals and
// complete windows; per operator the newest window holding it and the nodes it is on; and the
// window a restore would use now.
void push_peer_slices(const job::Driver& t, lua_State* L) {
  const auto& live = t.view().slices;
  struct Where {
    int64_t from = -1, to = -1;
    std::vector<uint32_t> nodes;
  };
  std::map<std::string, Where> ops;
  lua_newtable(L);
  int i = 0;
  for (const auto& [node, r] : t.peer_slices()) {
    if (!live.count(node)) continue;
    lua_newtable(L);
    lua::set_field(L, "node", int64_t(node));
    lua::set_field(L, "bytes", int64_t(r.bytes));
    lua::set_field(L, "budget", int64_t(r.budget));
    lua::set_field(L, "log_bytes", int64_t(r.log_bytes));
    lua::set_field(L, "refused", int64_t(r.refused));
    lua_createtable(L, int(r.windows.size()), 0);
    for (size_t k = 0; k < r.windows.size(); ++k) {
      const auto& w = r.windows[k];
      lua_newtable(L);
      lua::set_field(L, "writer", std::to_string(w.writer_node) + "." + std::to_string(w.writer_index));
      lua::set_field(L, "from", int64_t(w.from));
      lua::set_field(L, "to", int64_t(w.to));
      lua::set_field(L, "units", int64_t(w.units.size()));
      lua_rawseti(L, -2, int(k + 1));
      for (const auto& u : w.units) {  // the newest window, and every node holding one (reports lag by up to 100 ms)
        Where& o = ops[slice_unit_name(u)];
        if (int64_t(w.from) > o.from) o.from = int64_t(w.from), o.to = int64_t(w.to);
        if (std::find(o.nodes.begin(), o.nodes.end(), uint32_t(node)) == o.nodes.end()) o.nodes.push_back(uint32_t(node));
      }
    }
    lua_setfield(L, -2, "windows");
    lua_rawseti(L, -2, ++i);
  }
  lua_setfield(L, -2, "agents");
  lua_newtable(L);
  for (const auto& [name, o] : ops) {
    lua_newtable(L);
    lua::set_field(L, "window_from", o.from);
    lua::set_field(L, "window_to", o.to);
    lua_createtable(L, int(o.nodes.size()), 0);
    for (size_t k = 0; k < o.nodes.size(); ++k) {
      lua_pushinteger(L, lua_Integer(o.nodes[k]));
      lua_rawseti(L, -2, int(k + 1));
    }
    lua_setfield(L, -2, "nodes");
    lua_setfield(L, -2, name.c_str());
  }
  lua_setfield(L, -2, "operators");
  if (auto w = t.restorable()) {
    lua_newtable(L);
    lua::set_field(L, "from", int64_t(w->from));
    lua::set_field(L, "to", int64_t(w->to));
    lua::set_field(L, "holders", int64_t(w->holders.size()));
    lua_setfield(L, -2, "restorable");
  }
}

// The checkpoint schedule in force and the sparse snapshots each rank of the plan holds.
int job_checkpoint(Controller& c, lua_State* L) {
  const auto& t = c.driver();
  lua_newtable(L);
  if (const auto* live = c.planner().policies().slot(policy::Kind::checkpoint).live())
    lua::set_field(L, "policy", live->label());
  const auto& a = t.applied();
  if (!a) return 1;
  const auto& s = a->plan.schedule;
  lua::set_field(L, "window", int64_t(s.window));
  lua::set_field(L, "period", int64_t(s.period));
  if (std::string off = t.sparse_off(); !off.empty()) lua::set_field(L, "not_taken", off);
  lua_createtable(L, int(s.slots.size()), 0);
  for (size_t i = 0; i < s.slots.size(); ++i) {
    lua_pushinteger(L, lua_Integer(s.slots[i].size()));
    lua_rawseti(L, -2, int(i + 1));
  }
  lua_setfield(L, -2, "operators_per_slot");
  uint64_t bytes = 0;
  int64_t common_from = -1;  // the newest window every rank holds complete
  bool all = !a->ranks.empty();
  lua_createtable(L, int(a->ranks.size()), 0);
  for (size_t r = 0; r < a->ranks.size(); ++r) {
    auto it = t.sparse_holdings().find(a->ranks[r]);
    job::SparseHolding h = it == t.sparse_holdings().end() ? job::SparseHolding{} : it->second;
    lua_newtable(L);
    lua::set_field(L, "worker", participant_name(a->ranks[r]));
    lua::set_field(L, "bytes", int64_t(h.bytes));
    lua::set_field(L, "copy_ms", h.copy_ms);
    if (h.window_from >= 0) {
      lua::set_field(L, "window_from", h.window_from);
      lua::set_field(L, "window_to", h.window_to);
    }
    lua_rawseti(L, -2, int(r + 1));
    bytes += h.bytes;
    all = all && h.window_from >= 0;
    if (h.window_from >= 0) common_from = common_from < 0 ? h.window_from : std::min(common_from, h.window_from);
  }
  lua_setfield(L, -2, "workers");
  lua::set_field(L, "bytes", int64_t(bytes));
  if (all) lua::set_field(L, "complete_from", common_from);
  lua::set_field(L, "bandwidth_Bps", t.checkpoint_facts().bandwidth_Bps);
  lua::set_field(L, "path_Bps", t.checkpoint_facts().path_Bps);
  push_peer_slices(t, L);
  return 1;
}

// The degraded steps after a patched step: since which step, the groups out and those whose ranks
// left compute on, who was lost, what the redundancy policy said follows, and what they have lost so
// far; null when none.
nlohmann::ordered_json degraded_json(const job::phase::Degraded* d) {
  if (!d) return nullptr;
  nlohmann::ordered_json j;
  j["since_step"] = d->step;
  j["patch"] = d->patch;
  std::vector<uint32_t> out;
  for (uint32_t g : d->damaged)
    if (std::find(d->rejoined.begin(), d->rejoined.end(), g) == d->rejoined.end()) out.push_back(g);
  j["groups_out"] = out;
  j["groups_rejoined"] = d->rejoined;
  auto lost = nlohmann::ordered_json::array();
  for (const auto& p : d->lost) lost.push_back(participant_name(p));
  j["lost"] = std::move(lost);
  j["after_patch"] = plan::after_patch_name(d->after);
  j["steps"] = d->steps;
  j["lost_ms"] = d->lost_ms;
  return j;
}

// The shard stacks in force (parallel.groups; SPARe): each group's workers, the types it hosts and
// computes, the depth, the types only one group up hosts now, and the patched steps so far.
int job_stacks(Controller& c, lua_State* L) {
  const auto& t = c.driver();
  nlohmann::ordered_json j;
  if (const auto* live = c.planner().policies().slot(policy::Kind::redundancy).live()) j["policy"] = live->label();
  j["patched_steps"] = c.patched_steps();
  const auto& a = t.applied();
  if (!a) {
    lua::push_json(L, j);
    return 1;
  }
  const plan::Plan& p = a->plan;
  const plan::ShardStacks& s = p.stacks;
  const uint32_t G = plan::group_count(p);
  j["groups"] = G;
  j["redundancy"] = s.redundancy;
  j["depth"] = s.depth();
  std::vector<uint32_t> hosts_up(G, 0);
  auto groups = nlohmann::ordered_json::array();
  for (uint32_t g = 0; g < G; ++g) {
    plan::GroupSpan span = plan::group_span(p, g);
    nlohmann::ordered_json gj;
    gj["group"] = g;
    auto workers = nlohmann::ordered_json::array();
    for (uint32_t r = span.first; r < span.first + span.count && r < a->ranks.size(); ++r)
      workers.push_back(participant_name(a->ranks[r]));
    gj["workers"] = std::move(workers);
    gj["up"] = span.count > 0;
    gj["hosts"] = g < s.hosts.size() ? s.hosts[g] : std::vector<uint32_t>{};
    gj["computes"] = g < s.assignment.size() ? s.assignment[g] : std::vector<uint32_t>{};
    if (span.count > 0 && g < s.hosts.size())
      for (uint32_t type : s.hosts[g])
        if (type < G) ++hosts_up[type];
    groups.push_back(std::move(gj));
  }
  j["stacks"] = std::move(groups);
  auto singletons = nlohmann::ordered_json::array();
  for (uint32_t type = 0; type < G; ++type)
    if (hosts_up[type] == 1) singletons.push_back(type);
  j["singletons"] = std::move(singletons);
  j["degraded"] = degraded_json(t.degraded());
  lua::push_json(L, j);
  return 1;
}

// The script is read and checked here, on the chunk's thread (Runs::here): whatever it does, the
// loop goes on serving the mesh and the other sessions; only its start runs on the loop.
int drill_start(Controller& c, lua_State* L) {
  std::string path = lua::check_string(L, 1, "drill.start", "path");
  if (!c.prepare_drill) return luaL_error(L, "drill.start: this controller cannot run drills (use `salamander run`)");
  auto start = c.prepare_drill(path);
  if (!start) return luaL_error(L, "drill.start: %s", start.error().message().c_str());
  Status started = Error("the controller is stopping");
  run_on_loop([&] { started = (*start)(); });
  if (!started) return luaL_error(L, "drill.start: %s", started.error().message().c_str());
  lua_pushboolean(L, 1);
  return 1;
}

// job.health(): each worker's recent step times per phase and its speed verdict (job/health.h).
int job_health(Controller& c, lua_State* L) {
  const auto& watch = c.driver().health();
  const auto report = watch.report();
  lua_newtable(L);
  lua::set_field(L, "window", int64_t(watch.options().window));
  lua::set_field(L, "slow_ratio", watch.options().slow_ratio);
  lua::set_field(L, "back_ratio", watch.options().back_ratio);
  lua::set_field(L, "slow", int64_t(watch.slow_count()));
  if (const auto* live = c.planner().policies().slot(policy::Kind::health).live()) lua::set_field(L, "policy", live->label());
  const auto& corrupt = c.driver().corrupt_copies();
  uint64_t corrupt_total = 0;
  for (const auto& [who, n] : corrupt) corrupt_total += n;
  lua::set_field(L, "corrupt_copies", int64_t(corrupt_total));
  lua_createtable(L, int(report.size()), 0);
  for (size_t i = 0; i < report.size(); ++i) {
    const auto& h = report[i];
    lua_newtable(L);
    lua::set_field(L, "worker", participant_name(h.who));
    lua::set_field(L, "node", int64_t(h.who.node));
    lua::set_field(L, "busy_ms", h.median.busy_ms);
    lua::set_field(L, "exchange_ms", h.median.exchange_ms);
    lua::set_field(L, "sync_ms", h.median.sync_ms);
    lua::set_field(L, "update_ms", h.median.update_ms);
    lua::set_field(L, "ratio", h.ratio);
    lua::set_field(L, "steps", int64_t(h.steps));
    lua::set_field(L, "state", std::string(h.slow ? "slow" : "ok"));
    if (h.since_step) lua::set_field(L, "since_step", int64_t(h.since_step));
    lua::set_field(L, "share", c.driver().shares().share(h.who));
    auto bad = corrupt.find(h.who);
    lua::set_field(L, "corrupt", int64_t(bad == corrupt.end() ? 0 : bad->second));
    lua_rawseti(L, -2, int(i + 1));
  }
  lua_setfield(L, -2, "workers");
  return 1;
}

int drill_status(Controller& c, lua_State* L) {
  auto j = c.drill_status ? c.drill_status() : nlohmann::ordered_json();
  if (j.is_null()) lua_pushnil(L);
  else lua::push_json(L, j);
  return 1;
}

}  // namespace

void register_training_api(lua::ApiRegistry& reg, Controller& c) {
  reg.add_module("drill", "failure drills on the live job: start a drill script, watch it (docs/drills.md)");
  add_controller_fn(reg, c, "drill", "start", "drill.start(path) -> true",
                    "Runs a drill script (scripts/drills/*.lua: kill, drain, freeze, partition, add, replay_trace, expect) against "
                    "this job; its actions and its outcome are events (job.events()). Its `at_s` times count from the next "
                    "committed step. One drill at a time.",
                    Role::operate, drill_start, Runs::here);
  add_controller_fn(reg, c, "drill", "status", "drill.status() -> {name, file, actions, fired, training_s, next} | nil",
                    "The running drill: how many of its actions have fired and the next ones.", Role::observe,
                    drill_status);
  auto add = [&](const char* name, const char* sig, const char* doc, Role role, ControllerFn fn) {
    add_controller_fn(reg, c, "job", name, sig, doc, role, fn);
  };
  add("metrics", "job.metrics([n = 20]) -> {steps, first_loss, loss, tokens_per_s, recent = {{step, loss, ...}, ...}}",
      "Training metrics: committed steps, the first and the latest loss, tokens/s over the run and over the "
      "last 20 steps, and the last n step records (loss, ce, aux, grad_norm, lr, tokens, step_ms, "
      "compute_ms, tokens_per_s, workers, plan, imbalance: the busiest worker's expert tokens over the mean; "
      "val_loss on a step of train.eval_every). metrics.csv in the run directory has every step.",
      Role::observe, job_metrics);
  add("health", "job.health() -> {window, slow_ratio, back_ratio, slow, policy, corrupt_copies, workers = {{worker, node, "
      "busy_ms, exchange_ms, sync_ms, update_ms, ratio, steps, state, since_step, share, corrupt}, ...}}",
      "Gray failures: per worker, the medians over the last `window` committed steps of its time computing "
      "(busy_ms), in the passes' token exchanges, in the gradient sync and in its last update; ratio: its "
      "computing time over the median of the others' in the same step (the window's median); state: slow "
      "once the ratio reaches slow_ratio, ok again at back_ratio (events node_slow, node_speed_back); share: "
      "its part of each step's work as the health policy (`policy`) decided it, 1 being an even part "
      "(event work_shares); corrupt: the copies it held whose digests disagreed with their unit's majority "
      "(event unit_corrupt; docs/health.md).",
      Role::observe, job_health);
  add("loads", "job.loads([layer]) -> {steps, layers = {{tokens per expert}, ...}} | {steps, experts}",
      "Mean tokens routed to each expert per step over the recent window (train.rebalance_every steps), "
      "per layer (Lua lists: expert e is at index e + 1). These are the loads a rebalance plans for.",
      Role::observe, job_loads);
  add("rebalance", "job.rebalance() -> true",
      "Asks the allocation and placement policies for a new plan on the recent loads; it takes effect at "
      "the next step boundary (workers switch plans between steps, never inside one).",
      Role::operate, job_rebalance);
  add("checkpoint",
      "job.checkpoint() -> {policy, window, period, not_taken, operators_per_slot, workers = {{worker, bytes, copy_ms, "
      "window_from, window_to}, ...}, bytes, complete_from, bandwidth_Bps, path_Bps, agents = {{node, bytes, budget, "
      "log_bytes, refused, "
      "windows = {{writer, from, to, units}, ...}}, ...}, operators = {[name] = {window_from, window_to, nodes}}, "
      "restorable = {from, to, holders}}",
      "The checkpoint-window policy's schedule in force (a window of `window` iterations every `period`, the "
      "operators each slot takes in full; not_taken: why its ranks take no slots, where a restore from its window "
      "would run as many steps again as from the dense snapshots) and the sparse snapshots each rank of the plan "
      "holds after its last "
      "vote: bytes, the newest complete window's iterations and the last slot's copy time; complete_from: the "
      "first iteration of the newest window every rank holds; bandwidth_Bps: the copy bandwidth measured; path_Bps: "
      "the bytes a slot's whole path moves a CPU-second of the writer's thread (train.snapshot_cpu_share). "
      "What the live agents hold of them in their memory (each agent's bytes against its budget, of them the "
      "upstream logs a lost expert is rebuilt from, slices refused, complete windows by writer), where each operator's newest window is held, and the window a "
      "restore from peers would use now (docs/checkpoints.md).",
      Role::observe, job_checkpoint);
  add("stacks",
      "job.stacks() -> {policy, patched_steps, groups, redundancy, depth, degraded, stacks = {{group, workers, up, hosts, "
      "computes}, ...}, singletons}",
      "The data-parallel groups of the plan in force (parallel.groups) and the redundancy policy's shard stacks: "
      "each group's workers, whether it is up, the shard types it hosts and those it computes each step (0-based), "
      "the all-reduce depth (the most types a group computes), the types only one group up hosts now (without "
      "spreading, the next loss there is a wipe-out), the steps patched so far (a rank lost mid-step, the step "
      "kept), and `degraded`: while the steps after a patch train on with its groups out, since_step, patch, "
      "groups_out, groups_rejoined (damaged, their ranks left computing on), lost, after_patch, steps and lost_ms "
      "(against a regrouped plan's step; null otherwise). Each "
      "patch is an event (`patch`, `step_patched`, `regroup`; docs/parallel.md).",
      Role::observe, job_stacks);
  add("training", "job.training() -> {phase, plan, plan_from_step, ranks, failure, checkpoint, store}",
      "The training driver: its phase (gathering, planning, running, saving, done, failed), the plan in "
      "force and since which step, the rank order (node.worker), and why training stopped if it failed.",
      Role::observe, job_training);
}

}  // namespace sal::console
