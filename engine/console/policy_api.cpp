// policy_api.cpp — the `policy` module of the REPL: list, show, load, reload, diff, rollback
// and decide, over the controller's policy slots, plus job.plan(). Reading is for every role;
// asking what a policy would decide (decide, diff: they run policy code) needs `operate`; changing
// a slot (load, reload, rollback) needs `admin`. decide and diff are pure questions: they take a
// snapshot of the slot on the loop (no policy code runs there: slot.h) and run the policy code on
// the evaluation thread, on copies of the generations. A relative path given to load or diff is read
// against the local client's working directory (Sandbox::working_dir), not the controller's.
#include <lua.hpp>

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>

#include "core/strings.h"
#include "lua/convert.h"
#include "mesh/controller.h"
#include "mesh/step_log.h"
#include "plan/domains.h"
#include "policy/frontier_report.h"
#include "policy/lua_io.h"
#include "policy/plan_recovery.h"
#include "policy/planner.h"
#include "console/repl_eval.h"
#include "console/repl_server.h"

namespace sal::console {
namespace {

policy::Kind kind_arg(lua_State* L, int idx, const char* fn) {
  std::string s = lua::check_string(L, idx, fn, "a slot (allocation, placement, checkpoint, redundancy)");
  policy::Kind k;
  if (!policy::parse_kind(s, k))
    luaL_error(L, "%s: no slot '%s' (allocation, placement, checkpoint, redundancy)", fn, shown_input(s).c_str());
  return k;
}

void push_generation(lua_State* L, const policy::Generation& g) {
  lua_newtable(L);
  lua::set_field(L, "name", g.name());
  lua::set_field(L, "generation", int64_t(g.number));
  lua::set_field(L, "hash", g.hash());
  lua::set_field(L, "origin", g.source().origin);
  lua::set_field(L, "decisions", int64_t(g.stats.decisions));
  lua::set_field(L, "errors", int64_t(g.stats.errors));
  lua::set_field(L, "rejections", int64_t(g.stats.rejections));
  lua::set_field(L, "p50_ms", g.stats.percentile(0.5));
  lua::set_field(L, "p99_ms", g.stats.percentile(0.99));
  if (!g.stats.last_problem.empty()) lua::set_field(L, "last_problem", g.stats.last_problem);
}

void push_slot(lua_State* L, const policy::Slot& s, bool detailed) {
  if (s.live()) {
    push_generation(L, *s.live());
  } else {
    lua_newtable(L);
    lua::set_field(L, "name", "floor");
  }
  lua::set_field(L, "slot", std::string(policy::kind_name(s.kind())));
  lua::set_field(L, "floor_decisions", int64_t(s.floor_decisions()));
  if (!detailed) return;
  if (s.live()) lua::set_field(L, "doc", s.live()->doc());
  if (s.previous()) {
    push_generation(L, *s.previous());
    lua_setfield(L, -2, "previous");
  }
  if (const auto& d = s.last_decision()) {
    lua_newtable(L);
    lua::set_field(L, "by", d->decided_by);
    lua::set_field(L, "summary", policy::ops_for(s.kind()).summary(d->proposal));
    if (!d->problem.empty()) lua::set_field(L, "problem", d->problem);
    lua::set_field(L, "ms", d->ms);
    lua_setfield(L, -2, "last_decision");
  }
}

int policy_list(Controller& c, lua_State* L) {
  lua_newtable(L);
  int i = 1;
  for (policy::Kind k : policy::kKinds) {
    push_slot(L, c.planner().policies().slot(k), false);
    lua_rawseti(L, -2, i++);
  }
  return 1;
}

int policy_show(Controller& c, lua_State* L) {
  policy::Kind k = kind_arg(L, 1, "policy.show");
  push_slot(L, c.planner().policies().slot(k), true);
  lua_newtable(L);
  int i = 1;
  for (const auto& name : c.planner().policies().resolver().shipped(k)) {
    lua_pushstring(L, name.c_str());
    lua_rawseti(L, -2, i++);
  }
  lua_setfield(L, -2, "shipped");
  return 1;
}

// Runs a slot-changing action and answers with the slot's new state (or raises the refusal).
int slot_action(Controller& c, lua_State* L, const char* fn, policy::Kind k, const std::function<Status()>& act) {
  if (auto s = act(); !s) return luaL_error(L, "%s: %s", fn, s.error().message().c_str());
  c.request_plan("policy change in the " + std::string(policy::kind_name(k)) + " slot");
  push_slot(L, c.planner().policies().slot(k), false);
  return 1;
}

using SourceOf = std::function<Result<policy::Source>(policy::PolicySet&)>;

// policy.load and policy.reload. The candidate's code — its load, selftest, replay and state
// migration, each under the policy budget — runs here, on the chunk's thread, on a snapshot of the
// slot the loop hands over (policy::prepare); only the swap runs on the loop, which meanwhile
// serves the mesh and the other sessions whatever the candidate does.
int load_off_loop(Controller& c, lua_State* L, const char* fn, policy::Kind k, const SourceOf& source_of) {
  policy::SlotSnapshot snap;
  Result<policy::Source> src = Error("no source");
  if (!run_on_loop([&] {
        auto& policies = c.planner().policies();
        snap = policies.slot(k).snapshot();
        src = source_of(policies);
      }))
    return luaL_error(L, "%s: the controller is stopping", fn);
  if (!src) return luaL_error(L, "%s: %s", fn, src.error().message().c_str());
  auto prepared = policy::prepare(snap, *src);
  return call_on_loop(L, [&](lua_State* S) {
    return slot_action(c, S, fn, k, [&] {
      return c.planner().policies().slot(k).install(std::move(prepared), *src, snap.version, caller(S));
    });
  });
}

// What policy.load and policy.diff were given: a name, a .lua path or Lua source — or, with a third
// argument, source named by it (a client's file read on its machine: errors say name:line). A
// relative path is the local client's: read against its working directory.
struct Candidate {
  std::string what, name, base_dir;
};

constexpr size_t kSourceNameMax = 200;

Candidate candidate_arg(lua_State* L, const char* fn) {
  Candidate c;
  c.what = lua::check_string(L, 2, fn, "a policy name, a .lua path, or Lua source");
  if (!lua_isnoneornil(L, 3)) {
    c.name = lua::check_string(L, 3, fn, "the source's name (its file's, for error messages)");
    if (c.name.empty() || c.name.size() > kSourceNameMax || c.name.find('\n') != std::string::npos)
      luaL_error(L, "%s: the source's name must be 1 to %d characters on one line", fn, int(kSourceNameMax));
  }
  c.base_dir = lua::Sandbox::working_dir(L);
  return c;
}

Result<policy::Source> resolve_candidate(const policy::PolicySet& set, policy::Kind k, const Candidate& c) {
  if (!c.name.empty()) return policy::given_source(c.what, c.name);
  return set.resolver().resolve(k, c.what, c.base_dir);
}

int policy_load(Controller& c, lua_State* L) {
  policy::Kind k = kind_arg(L, 1, "policy.load");
  Candidate cand = candidate_arg(L, "policy.load");
  return load_off_loop(c, L, "policy.load", k, [&](policy::PolicySet& set) { return resolve_candidate(set, k, cand); });
}

int policy_reload(Controller& c, lua_State* L) {
  policy::Kind k = kind_arg(L, 1, "policy.reload");
  return load_off_loop(c, L, "policy.reload", k, [&](policy::PolicySet& set) { return set.slot(k).reload_source(); });
}

int policy_rollback(Controller& c, lua_State* L) {
  policy::Kind k = kind_arg(L, 1, "policy.rollback");
  return slot_action(c, L, "policy.rollback", k, [&] { return c.planner().policies().slot(k).rollback(caller(L)); });
}

// A pure question's material, taken on the loop (no policy code runs there): the slot's snapshot
// and, for diff, the candidate's source.
struct Question {
  bool taken = false;
  policy::SlotSnapshot snap;
  Result<policy::Source> candidate = Error("no candidate");
};

Question ask(Controller& c, policy::Kind k, const Candidate* candidate) {
  Question q;
  q.taken = run_on_loop([&] {
    auto& policies = c.planner().policies();
    q.snap = policies.slot(k).snapshot();
    if (candidate) q.candidate = resolve_candidate(policies, k, *candidate);
  });
  return q;
}

// policy.diff's answer, or why there is none (computed before anything is pushed or raised).
Result<policy::DiffReport> diff_answer(Controller& c, policy::Kind k, const Candidate& what) {
  Question q = ask(c, k, &what);
  if (!q.taken) return Error("the controller is stopping");
  if (!q.candidate) return q.candidate.error();
  return policy::diff(q.snap, *q.candidate);
}

int policy_diff(Controller& c, lua_State* L) {
  policy::Kind k = kind_arg(L, 1, "policy.diff");
  auto r = diff_answer(c, k, candidate_arg(L, "policy.diff"));
  if (!r) return luaL_error(L, "policy.diff: %s", r.error().message().c_str());
  lua_newtable(L);
  lua::set_field(L, "live", r->live);
  lua::set_field(L, "candidate", r->candidate);
  lua::set_field(L, "changes", r->summary);
  return 1;
}

// policy.decide's answer for `in` (the slot's latest input when absent).
Result<policy::Decision> decide_answer(Controller& c, policy::Kind k, std::optional<policy::Input> in) {
  Question q = ask(c, k, nullptr);
  if (!q.taken) return Error("the controller is stopping");
  if (!in && !q.snap.latest)
    return fail("the ", policy::kind_name(k), " slot has decided nothing yet; pass a ctx table");
  return policy::answer(q.snap, in ? *in : *q.snap.latest);
}

int policy_decide(Controller& c, lua_State* L) {
  policy::Kind k = kind_arg(L, 1, "policy.decide");
  std::optional<policy::Input> in;
  if (lua_istable(L, 2)) {
    lua::Meter m(L, policy::lua_io::read_limits(L, "policy.decide's ctx"));
    auto r = policy::ops_for(k).read_ctx(L, 2, m);
    if (!r) return luaL_error(L, "policy.decide: ctx: %s", r.error().message().c_str());
    in = std::move(*r);
  }
  auto d = decide_answer(c, k, std::move(in));
  if (!d) return luaL_error(L, "policy.decide: %s", d.error().message().c_str());
  lua_newtable(L);
  lua::set_field(L, "by", d->decided_by);
  lua::set_field(L, "summary", policy::ops_for(k).summary(d->proposal));
  if (!d->problem.empty()) lua::set_field(L, "problem", d->problem);
  lua::set_field(L, "ms", d->ms);
  lua::push_json(L, policy::ops_for(k).to_json(d->proposal));
  lua_setfield(L, -2, "proposal");
  return 1;
}

// The checkpoint schedule: the window, and each iteration's operators by name.
void push_schedule(lua_State* L, const plan::CheckpointSchedule& s, const policy::CheckpointInput& in) {
  nlohmann::ordered_json j;
  j["window"] = s.window;
  j["period"] = s.period;
  auto slots = nlohmann::ordered_json::array();
  for (const auto& iteration : s.slots) {
    auto names = nlohmann::ordered_json::array();
    for (uint32_t op : iteration) names.push_back(op < in.operators.size() ? in.operators[op].name : std::to_string(op));
    slots.push_back(std::move(names));
  }
  j["slots"] = std::move(slots);
  j["operators"] = in.operators.size();
  j["iteration_s"] = in.iteration_s;
  j["bandwidth_Bps"] = in.bandwidth_Bps;
  lua::push_json(L, j);
}

void push_stacks(lua_State* L, const plan::ShardStacks& s) {
  nlohmann::ordered_json j;
  j["redundancy"] = s.redundancy;
  j["hosts"] = s.hosts;
  j["assignment"] = s.assignment;
  j["depth"] = s.depth();
  j["wipeout"] = s.wipeout;
  lua::push_json(L, j);
}

// Per layer, the busiest node's expert work over the mean under `p` on the recent loads
// (job.loads()); empty before any step has reported loads.
std::vector<double> plan_balance(Controller& c, const plan::Plan& p) {
  const job::LoadWindow& window = c.driver().loads();
  if (window.steps() == 0) return {};
  std::vector<double> flat;
  for (const auto& row : window.mean()) flat.insert(flat.end(), row.begin(), row.end());
  std::vector<std::vector<std::vector<uint32_t>>> placement;
  for (const auto& layer : p.layers) placement.push_back(layer.placement);
  return job::layer_imbalances(flat, placement, p.experts);
}

// A plan on hosts of several workers (issue 40): hosts = how many, domains = each position's host
// (0-based, as in plan files), p_hosts = {P(1), P(2), P(3)} of every layer together surviving that
// many random host losses; with racks (mesh.racks), racks, rack_of_host and p_racks likewise.
void push_host_recovery(lua_State* L, const plan::Plan& p) {
  if (p.domains.empty()) return;
  lua::set_field(L, "hosts", int64_t(policy::host_count(p)));
  lua::push_json(L, nlohmann::ordered_json(p.domains));
  lua_setfield(L, -2, "domains");
  std::vector<double> ps;
  auto curve = algo::recovery_curve(policy::host_placements_of(p), 3);
  for (size_t k = 1; curve && k < curve->size(); ++k) ps.push_back((*curve)[k].p);
  lua::push_json(L, nlohmann::ordered_json(ps));
  lua_setfield(L, -2, "p_hosts");
  if (p.racks.empty()) return;
  lua::set_field(L, "racks", int64_t(plan::domain_count(p.racks)));
  lua::push_json(L, nlohmann::ordered_json(p.racks));
  lua_setfield(L, -2, "rack_of_host");
  ps.clear();
  auto by_rack = algo::recovery_curve(policy::rack_placements_of(p), 3);
  for (size_t k = 1; by_rack && k < by_rack->size(); ++k) ps.push_back((*by_rack)[k].p);
  lua::push_json(L, nlohmann::ordered_json(ps));
  lua_setfield(L, -2, "p_racks");
}

int job_plan(Controller& c, lua_State* L) {
  const auto& cur = c.planner().current();
  bool with_layer = !lua_isnoneornil(L, 1);
  int64_t layer = with_layer ? lua::check_integer(L, 1, "job.plan", "a layer (0-based)") : 0;
  if (!cur) return lua_pushnil(L), 1;
  if (with_layer && (layer < 0 || layer >= int64_t(cur->plan.layers.size())))
    return luaL_error(L, "job.plan: layer %d is not in 0..%d", int(layer), int(cur->plan.layers.size()) - 1);
  lua_newtable(L);
  lua::set_field(L, "number", int64_t(cur->plan.version));
  lua::set_field(L, "epoch", int64_t(cur->epoch));
  lua::set_field(L, "nodes", int64_t(cur->plan.nodes));
  lua::set_field(L, "slots", int64_t(cur->plan.slots));
  lua::set_field(L, "floor", int64_t(cur->plan.floor));
  lua::set_field(L, "allocation_by", cur->allocation_by);
  lua::set_field(L, "placement_by", cur->placement_by);
  lua::set_field(L, "checkpoint_by", cur->checkpoint_by);
  lua::set_field(L, "redundancy_by", cur->redundancy_by);
  lua::set_field(L, "ms", cur->ms);
  if (!cur->note.empty()) lua::set_field(L, "note", cur->note);
  push_schedule(L, cur->plan.schedule, c.planner().checkpoint_input());
  lua_setfield(L, -2, "schedule");
  push_stacks(L, cur->plan.stacks);
  lua_setfield(L, -2, "stacks");
  const std::vector<double> balance = plan_balance(c, cur->plan);
  if (!balance.empty()) {
    double mean = 0;
    for (double b : balance) mean += b / double(balance.size());
    lua::set_field(L, "balance", mean);
  }
  push_host_recovery(L, cur->plan);
  if (const std::string& choice = c.planner().placement_choice(); !choice.empty()) {  // issue 35
    lua::push_json(L, nlohmann::ordered_json::parse(choice, nullptr, false));
    lua_setfield(L, -2, "placement");
  }
  if (with_layer) {
    nlohmann::ordered_json j;
    j["replicas"] = cur->plan.layers[size_t(layer)].replicas;
    j["placement"] = cur->plan.layers[size_t(layer)].placement;
    if (!balance.empty()) j["balance"] = balance[size_t(layer)];
    lua::push_json(L, j);
    lua_setfield(L, -2, "layer");
  }
  return 1;
}

// Issue 35: policy.frontier() — the plan in force and the recent loads taken on the loop, the
// frontier computed here, off it (policy/frontier_report.h); the balance judged on the window's
// recent steps, as the placement is told them.
int policy_frontier(Controller& c, lua_State* L) {
  std::optional<plan::Plan> plan;
  std::vector<std::vector<double>> loads;
  policy::StepLoads steps;
  const bool taken = run_on_loop([&] {
    if (const auto& cur = c.planner().current()) plan = cur->plan;
    if (c.driver().loads().steps() > 0) loads = c.driver().loads().mean(), steps = c.driver().loads().recent(policy::kPlacementSteps);
  });
  if (!taken) return luaL_error(L, "policy.frontier: the controller is stopping");
  if (!plan) return luaL_error(L, "policy.frontier: no plan yet");
  const bool measured = !loads.empty();
  if (!measured) loads.assign(plan->layers.size(), std::vector<double>(plan->experts, 1.0));
  auto j = policy::plan_frontier_json(*plan, loads, steps, c.driver().config().dispatch_by_counts);
  if (!j) return luaL_error(L, "policy.frontier: %s", j.error().message().c_str());
  (*j)["loads"] = measured ? "the recent window (job.loads())" : "none measured yet: uniform";
  (*j)["steps"] = steps.size();
  lua::push_json(L, *j);
  return 1;
}

}  // namespace

void register_policy_api(lua::ApiRegistry& reg, Controller& c) {
  reg.add_module("policy", "the policy slots: inspect, load, reload, diff, roll back, interrogate");
  auto add = [&](const char* name, const char* sig, const char* doc, Role role, ControllerFn fn,
                 Runs runs = Runs::on_loop) { add_controller_fn(reg, c, "policy", name, sig, doc, role, fn, runs); };
  add("list", "policy.list() -> {{slot, name, generation, hash, decisions, errors, rejections, p50_ms, p99_ms}, ...}",
      "Every slot's live generation: name, generation number, source hash, decision count, errors, "
      "rejected proposals, and decision time percentiles.",
      Role::observe, policy_list);
  add("show", "policy.show(slot) -> {name, doc, generation, hash, origin, previous, last_decision, shipped, ...}",
      "One slot in detail: the live generation, the previous one kept for rollback, the last decision "
      "(who decided, a summary, and the problem if the live generation could not), and the shipped policies.",
      Role::observe, policy_show);
  add("load", "policy.load(slot, name | path.lua | source [, source_name]) -> slot info",
      "Loads a new generation: load, shape check, selftest, replay of recent decisions through the C++ "
      "validators, state migration, then the swap between two decisions. Any failure leaves the live "
      "generation in place and raises the reason. A relative path is read against your working directory "
      "(a local session; under CURVE the controller's); source_name names source text in its errors "
      "(\\load SLOT FILE sends FILE's text so, read where you are).",
      Role::admin, policy_load, Runs::here);
  add("reload", "policy.reload(slot) -> slot info",
      "Reads the live generation's source again (its file, if it came from one) and loads it as a new generation.",
      Role::admin, policy_reload, Runs::here);
  add("diff", "policy.diff(slot, name | path.lua | source [, source_name]) -> {live, candidate, changes}",
      "What a candidate would decide differently from the live generation on the latest decision input, "
      "without loading it. A pure question: the slot (its replay inputs, last decision, failure counts) is "
      "untouched, and the policy code runs on copies of the generations, off the controller's loop.",
      Role::operate, policy_diff, Runs::here);
  add("rollback", "policy.rollback(slot) -> slot info",
      "Swaps the previous generation back in (it is kept warm: instant).", Role::admin, policy_rollback);
  add("decide", "policy.decide(slot [, ctx]) -> {by, summary, problem, ms, proposal}",
      "What the slot would decide now on its latest input, or on a ctx table written as the policy sees it "
      "(1-based): the live generation, else the previous one, else the floor, with the problem that made it "
      "fall back. The proposal comes back as in plan files (0-based ids). A pure question: the slot (its "
      "replay inputs, last decision, failure counts, rollback) is untouched, and the policy code runs on "
      "copies of the generations (their saved state restored), off the controller's loop.",
      Role::operate, policy_decide, Runs::here);
  add("frontier", "policy.frontier() -> {points = {{name, frontier, beaten_by, balance, median, balances, load_balance, "
      "p}, ...}, bound, bound_median, nodes, slots, floor, loads, steps}",
      "The placements no other beats on both balance and recovery for the plan in force's replica counts on the "
      "recent loads (docs/placement.md): blocks of g experts from mro's c down to 1, balance first, chain, mixed, "
      "and the plan in force itself (\"in force\"); balance is the busiest node's expert work over the mean, "
      "averaged over the layers — on each of the window's last `steps` steps as the dispatcher splits it "
      "(load_balance: on the mean loads) — p = {P(1), P(2), P(3)} for every layer together; bound: the lowest "
      "balance the replicas allow.",
      Role::observe, policy_frontier, Runs::here);
  add_controller_fn(reg, c, "job", "plan",
                    "job.plan([layer]) -> {number, epoch, nodes, slots, floor, allocation_by, placement_by, "
                    "checkpoint_by, redundancy_by, balance, note, placement, schedule, stacks, hosts, domains, "
                    "p_hosts, racks, rack_of_host, p_racks, ...}",
                    "The current plan: which generation decided each part, for how many nodes; its balance (the "
                    "busiest node's expert work over the mean on the recent loads, each expert's tokens split over "
                    "its replicas; 1 is even); the placement policy's account of its choice (the default's: the "
                    "frontier point, its balance and P(k), the alternative it turned down; in words in note); the "
                    "checkpoint schedule (window, period, each iteration's operators by name, and the iteration time "
                    "and snapshot bandwidth it was decided from) and the shard "
                    "stacks; on hosts of several workers, how many hosts, each position's host (domains, 0-based) "
                    "and p_hosts = {P(1), P(2), P(3)}: every layer surviving that many random host losses; with "
                    "mesh.racks, how many racks, each host's rack (rack_of_host) and p_racks likewise; "
                    "with a layer (0-based), its replica counts, node -> slots table (0-based expert ids, "
                    "as in plan files) and balance.",
                    Role::observe, job_plan);
}

}  // namespace sal::console
