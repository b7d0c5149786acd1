// drill_spec.cpp — see drill_spec.h. The script's calls are recorded as (kind, line, table) by one
// C function; the checks run in C++ afterwards, so every error can name the call's line.
#include "drill/drill_spec.h"

#include <lua.hpp>

#include <algorithm>
#include <cstdio>
#include <iterator>

#include <nlohmann/json.hpp>

#include "core/json_text.h"
#include "core/paths.h"
#include "core/strings.h"
#include "drill/trace.h"
#include "lua/convert.h"
#include "lua/sandbox.h"
#include "wire/fault_points.h"

namespace sal::drill {
namespace {

constexpr size_t kMaxDrillBytes = 1u << 20;
constexpr int64_t kDrillEvalBudgetMs = 2000;
constexpr size_t kDrillMemoryLimit = 32u << 20;

struct Call {
  std::string kind;
  int line = 0;
  nlohmann::ordered_json args;
};

using Json = nlohmann::ordered_json;

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

// What one drill script may hand to its calls, in all: a drill is a few dozen actions, and its
// file is at most kMaxDrillBytes; the limits keep a loop of calls, or one call of a huge shared
// table, from taking the controller's memory while the script runs (it is read on the loop).
constexpr size_t kDrillValues = size_t(1) << 16;
constexpr size_t kDrillBytes = kMaxDrillBytes;

// The calls a script made, and the meter their arguments are counted on.
struct Collector {
  std::vector<Call> calls;
  lua::Meter meter;
};

lua::MeterLimits drill_limits() {
  const std::string name = "a drill's limit for what its calls pass";
  return {.what = "the drill's calls", .values = {kDrillValues, name}, .bytes = {kDrillBytes, name}};
}

// __record(kind, {…}): appends the call to the collector (upvalue 1, a light userdata).
int record(lua_State* L) {
  auto* c = static_cast<Collector*>(lua_touserdata(L, lua_upvalueindex(1)));
  const char* kind = lua_tostring(L, lua_upvalueindex(2));
  if (lua_gettop(L) != 1 || !lua_istable(L, 1)) {
    lua_pushfstring(L, "%s{...} takes one table of named fields, e.g. %s{node = 2, step = 10}", kind, kind);
    return lua_error(L);
  }
  lua_Debug ar;
  int line = 0;
  if (lua_getstack(L, 1, &ar) && lua_getinfo(L, "l", &ar)) line = ar.currentline;
  std::string problem;
  {
    auto args = lua::to_json(L, 1, c->meter);
    if (args) c->calls.push_back({kind, line, std::move(*args)});
    else problem = args.error().message();
  }
  if (problem.empty()) return 0;
  lua_pushfstring(L, "%s{...}: %s", kind, problem.c_str());
  return lua_error(L);
}

void install(lua::Sandbox& sb, Collector& calls, const std::map<std::string, std::string>& args) {
  lua_State* L = sb.L();
  for (const char* kind : {"drill", "kill", "drain", "freeze", "crash", "slow", "corrupt", "add", "partition",
                           "replay_trace", "expect"}) {
    lua_pushlightuserdata(L, &calls);
    lua_pushstring(L, kind);
    lua_pushcclosure(L, record, 2);
    sb.set_global(kind);
  }
  lua_newtable(L);
  for (const auto& [k, v] : args) lua::set_field(L, k.c_str(), v);
  sb.set_global("args");
}

class Checker {
 public:
  Checker(const std::string& file, const Call& c) : where_(file + ":" + std::to_string(c.line)), c_(c) {}

  Status only(const std::vector<std::string>& keys) const {
    if (!c_.args.is_object()) {
      if (c_.args.empty()) return {};
      return fail(where_, ": ", c_.kind, "{...} takes named fields, not a list");
    }
    for (const auto& [k, v] : c_.args.items())
      if (std::find(keys.begin(), keys.end(), k) == keys.end())
        return fail(where_, ": ", c_.kind, ": unknown field '", k, "'", did_you_mean(k, keys), " (fields: ", join(keys, ", "),
                    ")");
    return {};
  }
  bool has(const char* k) const { return c_.args.is_object() && c_.args.contains(k); }
  const Json& value(const char* k) const { return c_.args[k]; }
  Result<double> number(const char* k, double lo, double hi) const {
    const auto& v = c_.args[k];
    if (!v.is_number() || v.get<double>() < lo || v.get<double>() > hi)
      return fail(where_, ": ", c_.kind, ".", k, ": expected a number in [", short_number(lo), ", ", short_number(hi),
                  "], got ", json_text(v));
    return v.get<double>();
  }
  Result<uint64_t> integer(const char* k, double lo, double hi) const {
    auto n = number(k, lo, hi);
    if (!n) return n.error();
    if (*n != double(int64_t(*n)))
      return fail(where_, ": ", c_.kind, ".", k, ": expected an integer, got ", short_number(*n));
    return uint64_t(*n);
  }
  Result<std::string> text(const char* k) const {
    const auto& v = c_.args[k];
    if (!v.is_string()) return fail(where_, ": ", c_.kind, ".", k, ": expected a string, got ", json_text(v));
    return v.get<std::string>();
  }
  // Optional fields: left unset when absent.
  template <class T>
  Status maybe_integer(const char* k, double lo, double hi, std::optional<T>& out) const {
    if (!has(k)) return {};
    auto v = integer(k, lo, hi);
    if (!v) return v.error();
    out = T(*v);
    return {};
  }
  Status maybe_number(const char* k, double lo, double hi, std::optional<double>& out) const {
    if (!has(k)) return {};
    auto v = number(k, lo, hi);
    if (!v) return v.error();
    out = *v;
    return {};
  }
  const std::string& where() const { return where_; }
  const std::string& kind() const { return c_.kind; }
  const Json& args() const { return c_.args; }

 private:
  std::string where_;
  const Call& c_;
};

Result<wire::FaultPoint> fault_point(const Checker& ck, const std::string& s) {
  std::vector<std::string> names;
  for (const auto& p : wire::kFaultPointNames) {
    if (!p.during) continue;
    if (p.name == s) return p.point;
    names.emplace_back(p.name);
  }
  return fail(ck.where(), ": ", ck.kind(), ".during: '", s, "' is not a point of the step", did_you_mean(s, names),
              " (one of: ", join(names, ", "), ")");
}

Status read_trigger(const Checker& ck, Action& a) {
  if (ck.has("step") == ck.has("at_s"))
    return fail(ck.where(), ": ", ck.kind(), ": give exactly one of step (after that many committed steps) or at_s");
  if (ck.has("step")) {
    auto s = ck.integer("step", 0, 1e12);
    if (!s) return s.error();
    a.step = *s;
  } else {
    auto t = ck.number("at_s", 0, 1e7);
    if (!t) return t.error();
    a.at_s = *t;
  }
  return {};
}

Status read_target(const Checker& ck, Action& a) {
  if (ck.has("node")) {
    auto n = ck.text("node");
    if (n && *n == "random") {
      a.node.reset();
    } else {
      // the mesh numbers nodes from 0, in the order they first registered (events.csv, job.nodes())
      auto id = ck.integer("node", 0, 1e9);
      if (!id)
        return fail(ck.where(), ": ", ck.kind(), ".node: expected a node id (an integer from 0) or \"random\", got ",
                    json_text(ck.value("node")));
      a.node = uint32_t(*id);
    }
  }
  if (ck.has("count")) {
    auto c = ck.integer("count", 1, 4096);
    if (!c) return c.error();
    if (a.node && *c != 1) return fail(ck.where(), ": ", ck.kind(), ": count > 1 needs node = \"random\"");
    a.count = uint32_t(*c);
  }
  return {};
}

// kill{controller = true, restart_after_s = D}: the controller itself, no node.
Status read_controller_kill(const Checker& ck, Action& a) {
  if (ck.has("controller")) {
    const auto& v = ck.args()["controller"];
    if (!v.is_boolean()) return fail(ck.where(), ": kill.controller: expected true or false, got ", json_text(v));
    a.controller = v.get<bool>();
  }
  if (!a.controller) {
    if (ck.has("restart_after_s")) return fail(ck.where(), ": kill: `restart_after_s` goes with controller = true");
    return {};
  }
  for (const char* k : {"node", "count", "expert", "layer", "during"})
    if (ck.has(k)) return fail(ck.where(), ": kill: controller = true kills the controller, not nodes (no ", k, ")");
  std::optional<double> restart;
  SAL_TRY(ck.maybe_number("restart_after_s", 0, 3600, restart));
  a.restart_after_s = restart.value_or(a.restart_after_s);
  return {};
}

// slow{node, factor, for_s}: the node's workers at `factor` of their CPU share for for_s seconds.
Status read_slow(const Checker& ck, Action& a) {
  if (!ck.has("factor")) return fail(ck.where(), ": slow: factor (the share of its CPU the node keeps, 0.05..1) is required");
  if (!ck.has("for_s")) return fail(ck.where(), ": slow: for_s (how long the node stays slow) is required");
  auto f = ck.number("factor", 0.05, 1);
  if (!f) return f.error();
  auto t = ck.number("for_s", 0.001, 86400);
  if (!t) return t.error();
  a.factor = *f;
  a.ms = uint64_t(*t * 1e3 + 0.5);
  return {};
}

// corrupt{node, unit, bits}: one named node (its workers' copies of the unit), a unit by its name.
Status read_corrupt(const Checker& ck, Action& a) {
  if (!ck.has("node")) return fail(ck.where(), ": corrupt: node (the node whose copy is corrupted) is required");
  if (!a.node) return fail(ck.where(), ": corrupt.node: a node id (\"random\" would pick a node with no copy of the unit)");
  if (!ck.has("unit"))
    return fail(ck.where(), ": corrupt: unit (\"embedding\", \"layerL.dense\", \"layerL.gate\" or \"layerL.expertE\") is required");
  auto name = ck.text("unit");
  if (!name) return name.error();
  a.unit = parse_unit_name(*name);
  if (!a.unit)
    return fail(ck.where(), ": corrupt.unit: '", *name, "' is no unit's name (\"embedding\", \"layerL.dense\", "
                "\"layerL.gate\" or \"layerL.expertE\", 0-based)");
  if (!ck.has("bits")) return fail(ck.where(), ": corrupt: bits (how many bits of the copy to flip, 1..4096) is required");
  auto bits = ck.integer("bits", 1, 4096);
  if (!bits) return bits.error();
  a.bits = uint32_t(*bits);
  return {};
}

Result<Action> read_action(const Checker& ck, ActionKind kind) {
  Action a;
  a.kind = kind;
  a.where = ck.where();
  std::vector<std::string> keys{"step", "at_s", "count"};
  if (kind != ActionKind::add) keys.push_back("node");
  if (kind == ActionKind::kill) keys.insert(keys.end(), {"during", "expert", "layer", "rack", "controller", "restart_after_s"});
  if (kind == ActionKind::freeze) keys.push_back("ms");
  if (kind == ActionKind::partition) keys.push_back("for_s");
  if (kind == ActionKind::slow) keys.insert(keys.end(), {"factor", "for_s"});
  if (kind == ActionKind::corrupt) keys = {"step", "at_s", "node", "unit", "bits"};
  SAL_TRY(ck.only(keys));
  SAL_TRY(read_trigger(ck, a));
  if (kind == ActionKind::kill) SAL_TRY(read_controller_kill(ck, a));
  if (a.controller) return a;
  SAL_TRY(read_target(ck, a));
  if (ck.has("expert")) {
    if (ck.has("node") || ck.has("count") || ck.has("during"))
      return fail(ck.where(), ": kill: `expert` picks the nodes itself (no node, count or during)");
    auto e = ck.integer("expert", 0, 1e6);
    if (!e) return e.error();
    auto l = ck.has("layer") ? ck.integer("layer", 0, 1e6) : Result<uint64_t>(uint64_t(0));
    if (!l) return l.error();
    a.holders_of = std::pair{int(*l), int(*e)};
  } else if (ck.has("layer")) {
    return fail(ck.where(), ": kill: `layer` goes with `expert`");
  }
  if (ck.has("rack")) {
    if (ck.has("node") || ck.has("count") || ck.has("during") || ck.has("expert"))
      return fail(ck.where(), ": kill: `rack` picks the nodes itself (no node, count, during or expert)");
    auto r = ck.text("rack");
    if (!r) return r.error();
    if (r->empty()) return fail(ck.where(), ": kill.rack: a rack's name from the job's mesh.racks");
    a.rack = *r;
  }
  if (ck.has("during")) {
    auto d = ck.text("during");
    if (!d) return d.error();
    auto p = fault_point(ck, *d);
    if (!p) return p.error();
    a.during = *p;
    if (a.count != 1) return fail(ck.where(), ": kill: `during` kills one node (count = 1)");
  }
  if (kind == ActionKind::freeze) {
    if (!ck.has("ms")) return fail(ck.where(), ": freeze: ms (how long the node stays stopped) is required");
    auto ms = ck.integer("ms", 1, 3.6e6);
    if (!ms) return ms.error();
    a.ms = *ms;
  }
  if (kind == ActionKind::partition) {
    if (!ck.has("for_s")) return fail(ck.where(), ": partition: for_s (how long the link stays cut) is required");
    auto t = ck.number("for_s", 0.001, 3600);
    if (!t) return t.error();
    a.ms = uint64_t(*t * 1e3 + 0.5);
  }
  if (kind == ActionKind::slow) SAL_TRY(read_slow(ck, a));
  if (kind == ActionKind::corrupt) SAL_TRY(read_corrupt(ck, a));
  return a;
}

Status read_expect(const Checker& ck, Expectations& e) {
  SAL_TRY(ck.only({"lost_steps", "resume_s", "min_throughput_share", "restores", "min_restores"}));
  SAL_TRY(ck.maybe_integer("lost_steps", 0, 1e12, e.lost_steps));
  SAL_TRY(ck.maybe_number("resume_s", 0, 1e6, e.resume_s));
  SAL_TRY(ck.maybe_number("min_throughput_share", 0, 10, e.min_throughput_share));
  SAL_TRY(ck.maybe_integer("restores", 0, 1e9, e.restores));
  return ck.maybe_integer("min_restores", 0, 1e9, e.min_restores);
}

Status read_header(const Checker& ck, DrillSpec& d) {
  SAL_TRY(ck.only({"name", "steps", "seed", "duration_s"}));
  SAL_TRY(ck.maybe_number("duration_s", 0.1, 1e7, d.duration_s));
  SAL_TRY(ck.maybe_integer("steps", 1, 1e12, d.steps));
  std::optional<uint64_t> seed;
  SAL_TRY(ck.maybe_integer("seed", 0, 9e15, seed));
  d.seed = seed.value_or(d.seed);
  if (ck.has("name")) {
    auto n = ck.text("name");
    if (!n) return n.error();
    d.name = *n;
  }
  return {};
}

// A relative trace path is the drill file's (a trace shipped beside it); where nothing is there
// and the working directory has it, the working directory's (a path given with --drill-arg).
std::string trace_path(const std::string& file, const std::string& dir) {
  if (file.empty() || file[0] == '/') return file;
  const std::string beside = dir + "/" + file;
  if (!path_exists(beside) && path_exists(file)) return absolute_path(file);
  return beside;
}

// A trace whose replay could not train: one instant (a count, not a time), or a span that its
// time_scale makes shorter than a second (most often times in another unit than the one assumed).
std::string trace_span_problem(const std::string& where, const TraceOptions& o, const TracePlan& t) {
  constexpr double kShortestDrillS = 1.0;
  const double span_s = t.duration_s / o.time_scale;
  if (span_s <= 0)
    return where + ": replay_trace: " + o.file + " holds a single instant (" + std::to_string(t.initial_nodes) +
           " local nodes at 0 s): it says how many nodes, not for how long; give the drill a duration "
           "(drill{duration_s = T}) to train that long on them";
  if (t.duration_s >= kShortestDrillS) return {};
  char buf[400];
  std::snprintf(buf, sizeof buf,
                " spans %.4g s of trace; at time_scale %g that is %.3g s of drill, too short to train: raise "
                "time_scale (or fit_s = T: the whole trace in T s), give drill{duration_s = T}, or, for a series "
                "of numeric times, say their unit (time_unit = 'min' or 'h'; now %g s)",
                span_s, o.time_scale, t.duration_s, o.unit_s);
  return where + ": replay_trace: " + o.file + buf;
}

Status read_trace(const Checker& ck, const std::string& dir, DrillSpec& d) {
  SAL_TRY(ck.only({"file", "format", "time_unit", "time_scale", "fit_s", "max_nodes", "start_s"}));
  TraceOptions o;
  auto file = ck.text("file");
  if (!file) return file.error();
  o.file = trace_path(*file, dir);
  if (ck.has("format")) {
    auto f = ck.text("format");
    if (!f) return f.error();
    if (*f != "auto" && *f != "bamboo" && *f != "counts" && *f != "series")
      return fail(ck.where(), ": replay_trace.format: '", *f, "' is not a trace format (auto, bamboo, counts, series)");
    o.format = *f;
  }
  if (ck.has("time_unit")) {
    auto u = ck.text("time_unit");
    if (!u) return u.error();
    auto unit = sim::trace_time_unit(*u);
    if (!unit) return fail(ck.where(), ": replay_trace.time_unit: ", unit.error().message());
    o.unit_s = *unit;
  }
  if (ck.has("time_scale")) {
    auto t = ck.number("time_scale", 1e-9, 1e6);
    if (!t) return t.error();
    o.time_scale = *t;
  }
  if (ck.has("fit_s")) {
    if (ck.has("time_scale"))
      return fail(ck.where(), ": replay_trace: time_scale and fit_s both set the time scale: give one");
    auto f = ck.number("fit_s", 1, 1e7);
    if (!f) return f.error();
    o.fit_s = *f;
  }
  if (ck.has("max_nodes")) {
    auto m = ck.integer("max_nodes", 1, 4096);
    if (!m) return m.error();
    o.max_nodes = uint32_t(*m);
  }
  if (ck.has("start_s")) {
    auto s = ck.number("start_s", 0, 1e7);
    if (!s) return s.error();
    o.start_s = *s;
  }
  auto trace = trace_actions(o);
  if (!trace) return trace.error().with_context(ck.where() + ": replay_trace");
  d.actions.insert(d.actions.end(), trace->actions.begin(), trace->actions.end());
  d.initial_nodes = trace->initial_nodes;
  d.clock_from_start = true;
  d.trace_end_s = o.start_s + trace->duration_s;
  d.trace_time_scale = trace->time_scale;
  o.time_scale = trace->time_scale;
  d.trace_problem = trace_span_problem(ck.where(), o, *trace);
  return {};
}

Status read_call(const std::string& file, const std::string& dir, const Call& c, DrillSpec& d) {
  Checker ck(file, c);
  if (c.kind == "drill") return read_header(ck, d);
  if (c.kind == "expect") return read_expect(ck, d.expect);
  if (c.kind == "replay_trace") return read_trace(ck, dir, d);
  ActionKind kind = c.kind == "kill" ? ActionKind::kill
                    : c.kind == "drain" ? ActionKind::drain
                    : c.kind == "freeze" ? ActionKind::freeze
                    : c.kind == "crash" ? ActionKind::crash
                    : c.kind == "partition" ? ActionKind::partition
                    : c.kind == "slow"      ? ActionKind::slow
                    : c.kind == "corrupt"   ? ActionKind::corrupt
                                            : ActionKind::add;
  auto a = read_action(ck, kind);
  if (!a) return a.error();
  d.actions.push_back(std::move(*a));
  return {};
}

}  // namespace

const char* action_name(ActionKind k) {
  switch (k) {
    case ActionKind::kill: return "kill";
    case ActionKind::drain: return "drain";
    case ActionKind::freeze: return "freeze";
    case ActionKind::crash: return "crash";
    case ActionKind::add: return "add";
    case ActionKind::partition: return "partition";
    case ActionKind::slow: return "slow";
    case ActionKind::corrupt: return "corrupt";
  }
  return "?";
}

std::string Action::describe() const {
  std::string who = controller ? std::string("the controller")
                    : kind == ActionKind::add ? std::to_string(count) + " node" + (count > 1 ? "s" : "")
                    : holders_of ? "every holder of layer " + std::to_string(holders_of->first) + " expert " +
                                       std::to_string(holders_of->second)
                    : !rack.empty() ? "every node of rack " + rack
                    : node       ? "node " + std::to_string(*node)
                                 : std::to_string(count) + " random node" + (count > 1 ? "s" : "");
  std::string when = step ? "after step " + std::to_string(*step) : "at " + seconds(*at_s);
  std::string s = std::string(action_name(kind)) + " " + who + " " + when;
  if (during) s += " during the " + std::string(wire::fault_point_entry(*during).phrase);
  if (kind == ActionKind::freeze) s += " for " + std::to_string(ms) + " ms";
  if (kind == ActionKind::crash) s += " (its workers, not its agent)";
  if (kind == ActionKind::partition) s += " for " + seconds(double(ms) / 1e3);
  if (kind == ActionKind::corrupt && unit) s += ": " + std::to_string(bits) + " bits of its " + unit->name();
  if (kind == ActionKind::slow) s += " to " + std::to_string(int(factor * 100 + 0.5)) + " % for " + seconds(double(ms) / 1e3);
  if (controller) s += ", restarted after " + seconds(restart_after_s);
  return s + " (" + where + ")";
}

bool DrillSpec::partitions() const {
  return std::any_of(actions.begin(), actions.end(), [](const Action& a) { return a.kind == ActionKind::partition; });
}

const Action* DrillSpec::fault_injector() const {
  for (const auto& a : actions)
    if (a.kind == ActionKind::corrupt) return &a;
  return nullptr;
}

Status check_for_job(const DrillSpec& d, const std::string& job_file, bool faults_allowed, const ModelShape& model) {
  for (const auto& a : d.actions) {
    if (a.kind != ActionKind::corrupt) continue;
    if (!faults_allowed)
      return fail(a.where, ": corrupt{} is a fault injector, and the job ", job_file, " does not allow fault injection: "
                  "faults.inject is false (set faults = { inject = true } in the job file to run this drill)");
    if (a.unit && unit_index(model, *a.unit) < 0)
      return fail(a.where, ": corrupt.unit: the job ", job_file, "'s model has no ", a.unit->name(), " (",
                  model.layers, " layers of ", model.experts, " experts)");
  }
  return {};
}

const Action* DrillSpec::controller_kill() const {
  for (const auto& a : actions)
    if (a.controller) return &a;
  return nullptr;
}

Result<DrillSpec> load_drill(const std::string& path, const std::map<std::string, std::string>& args,
                             std::function<void()> service) {
  auto text = read_file(path, kMaxDrillBytes);
  if (!text) return Error("drill " + text.error().message());
  return parse_drill(*text, path, args, std::move(service));
}

Result<DrillSpec> parse_drill(const std::string& text, const std::string& path,
                              const std::map<std::string, std::string>& args, std::function<void()> service) {
  std::vector<Call> calls;
  {
    lua::Sandbox sb({.name = "drill " + path, .memory_limit = kDrillMemoryLimit});
    Collector collected{{}, lua::Meter(sb.L(), drill_limits())};
    install(sb, collected, args);
    if (auto s = sb.load(text, "@" + path); !s) return Error(s.error().message());
    if (auto s = sb.call(0, 0, {.deadline_ms = kDrillEvalBudgetMs, .service = service, .what = "drill script budget"}); !s)
      return Error(path + ": " + s.error().message());
    calls = std::move(collected.calls);
  }
  DrillSpec d;
  d.file = path;
  d.args = args;
  std::string dir = absolute_path(dir_name(path));
  for (const auto& c : calls) SAL_TRY(read_call(path, dir, c, d));
  if (d.name.empty()) {
    auto base = path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
    d.name = base.substr(0, base.rfind(".lua"));
  }
  if (d.trace_end_s && !d.duration_s) {
    if (!d.trace_problem.empty()) return Error(d.trace_problem);
    d.duration_s = d.trace_end_s;
  }
  if (d.actions.empty() && !d.initial_nodes)
    return fail(path, ": the drill schedules nothing (no kill, drain, freeze, crash, slow, corrupt, partition, add or replay_trace)");
  return d;
}

}  // namespace sal::drill
