// repl_module.cpp — see repl_module.h: the REPL's `sim` module, the discrete-event simulator run
// from the controller as background jobs. sim.run{...} (a scenario table, or the path of a scenario
// file) reads and checks the scenario at once — a wrong field is a Lua error naming it — and
// returns a job id; the simulation itself runs on its own thread (jobs.h), never on the
// controller's loop. The REPL is request/reply, so progress is polled: sim.status() answers
// immediately with the trial runs done, events, elapsed time, ETA and a one-line summary; a client
// that wants a live view repeats it (`salamander repl -e 'return sim.status().line'`). There is
// deliberately no blocking sim.wait(): a chunk's budget is short, and a session busy waiting
// would answer nothing else. sim.result(id) and
// sim.table(id) give the outcome once a job is done. Registered like the rest of the REPL API
// (help and completion come from these entries).
#include <lua.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <stdexcept>

#include "core/paths.h"
#include "lua/convert.h"
#include "sim/jobs.h"
#include "sim/repl_module.h"
#include "sim/run.h"
#include "sim/scenario.h"

namespace sal::sim {
namespace {

// The most trials sim.run's option may ask for.
constexpr int64_t kMaxTrials = 1000000;

[[noreturn]] void throw_error(const std::string& message) { throw std::runtime_error(message); }

template <class T>
T value_or_fail(Result<T> r) {
  if (!r) throw_error(r.error().message());
  return std::move(*r);
}

uint64_t job_id(lua_State* L, int idx, const char* fn) {
  int64_t id = lua::check_integer(L, idx, fn, "a job id (sim.run's result)");
  if (id < 1) throw_error("job ids start at 1, got " + std::to_string(id));
  return uint64_t(id);
}

// A scenario file path as typed: relative to the controller's working directory, else to the job
// file's directory.
std::string scenario_path(const std::string& job_dir, const std::string& path) {
  if (path.empty() || path[0] == '/' || path_exists(path) || job_dir.empty()) return path;
  std::string in_job_dir = job_dir + "/" + path;
  return path_exists(in_job_dir) ? in_job_dir : path;
}

sim::ScenarioFile read_scenario_arg(const std::string& job_dir, lua_State* L) {
  switch (lua_type(L, 1)) {
    case LUA_TTABLE: {
      nlohmann::json spec = value_or_fail(sim::scenario_json(L, 1));
      if (spec.is_array() && spec.empty()) spec = nlohmann::json::object();  // sim.run{}: every default
      return value_or_fail(sim::scenario_file_from_json(std::move(spec), "<repl>", absolute_path(".")));
    }
    case LUA_TSTRING: return value_or_fail(sim::load_scenario_file(scenario_path(job_dir, lua_tostring(L, 1))));
    default:
      throw_error(std::string("argument 1 must be a scenario table or the path of a scenario file, got ") +
           luaL_typename(L, 1));
  }
}

int64_t option_integer(lua_State* L, const char* key, int64_t lo, int64_t hi) {
  if (lua_type(L, -1) != LUA_TNUMBER || lua_tonumber(L, -1) != double(lua_tointeger(L, -1)))
    throw_error(std::string("option ") + key + " must be an integer, got " + luaL_typename(L, -1));
  int64_t v = lua_tointeger(L, -1);
  if (v < lo || v > hi)
    throw_error(std::string("option ") + key + " must be in " + std::to_string(lo) + ".." + std::to_string(hi) + ", got " +
         std::to_string(v));
  return v;
}

// The optional second argument: {trials = T, seed = S}; unknown keys are refused.
void read_run_options(lua_State* L, SimJobSpec& spec) {
  if (lua_isnoneornil(L, 2)) return;
  if (!lua_istable(L, 2)) throw_error(std::string("argument 2 must be a table {trials = , seed = }, got ") + luaL_typename(L, 2));
  lua_pushnil(L);
  while (lua_next(L, 2) != 0) {
    std::string key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
    if (key == "trials") spec.trials = int(option_integer(L, "trials", 1, kMaxTrials));
    else if (key == "seed") spec.seed = option_integer(L, "seed", 0, INT64_MAX);
    else throw_error("unknown option '" + key + "' (known: trials, seed)");
    lua_pop(L, 1);
  }
}

void push_view(lua_State* L, const SimJobView& v) {
  lua_newtable(L);
  lua::set_field(L, "id", int64_t(v.id));
  if (!v.name.empty()) lua::set_field(L, "name", v.name);
  lua::set_field(L, "source", v.source);
  lua::set_field(L, "state", sim_job_state_name(v.state));
  lua::set_field(L, "done", int64_t(v.done));
  lua::set_field(L, "total", int64_t(v.total));
  lua::set_field(L, "events", int64_t(v.events));
  lua::set_field(L, "elapsed_s", v.elapsed_s);
  if (v.eta_s >= 0) lua::set_field(L, "eta_s", v.eta_s);
  if (!v.current.empty()) lua::set_field(L, "current", v.current);
  if (!v.error.empty()) lua::set_field(L, "error", v.error);
  if (v.cancel_requested && v.state == SimJobState::running) lua::set_field(L, "cancelling", true);
  lua::set_field(L, "line", v.line());
}

int sim_run(const std::string& job_dir, SimJobs& jobs, lua_State* L) {
  SimJobSpec spec;
  spec.file = read_scenario_arg(job_dir, L);
  read_run_options(L, spec);
  lua_pushinteger(L, lua_Integer(value_or_fail(jobs.start(std::move(spec)))));
  return 1;
}

int sim_status(SimJobs& jobs, lua_State* L) {
  if (!lua_isnoneornil(L, 1)) {
    push_view(L, value_or_fail(jobs.view(job_id(L, 1, "sim.status"))));
  } else if (auto latest = jobs.latest()) {
    push_view(L, *latest);
  } else {
    lua_pushnil(L);
  }
  return 1;
}

int sim_list(SimJobs& jobs, lua_State* L) {
  auto all = jobs.list();
  lua_createtable(L, int(all.size()), 0);
  for (size_t i = 0; i < all.size(); ++i) {
    push_view(L, all[i]);
    lua_rawseti(L, -2, int(i + 1));
  }
  return 1;
}

int sim_result(SimJobs& jobs, lua_State* L) {
  auto r = value_or_fail(jobs.result(job_id(L, 1, "sim.result")));
  lua::push_json(L, sim::result_json(*r));
  return 1;
}

int sim_table(SimJobs& jobs, lua_State* L) {
  auto r = value_or_fail(jobs.result(job_id(L, 1, "sim.table")));
  lua_pushstring(L, sim::result_table(*r).c_str());
  return 1;
}

int sim_cancel(SimJobs& jobs, lua_State* L) {
  lua_pushboolean(L, value_or_fail(jobs.cancel(job_id(L, 1, "sim.cancel"))) ? 1 : 0);
  return 1;
}

}  // namespace

void register_repl_module(lua::ApiRegistry& reg, const std::string& job_dir, SimJobs& jobs) {
  reg.add_module("sim", "the discrete-event simulator as background jobs: run a scenario, poll it, read its result "
                        "(docs/simulator.md)");
  // The bodies run on the session's evaluation thread: `jobs` is safe to call from any thread and
  // touches nothing of the controller, so a scenario file is read without holding up the loop.
  auto add = [&](const char* name, const char* sig, const char* doc, Role role, std::function<int(lua_State*)> fn) {
    reg.add({"sim", name, sig, doc, role, std::move(fn)});
  };
  reg.add({"sim", "run", "sim.run(scenario_table | path [, {trials =, seed =}]) -> job id",
      "Starts a simulation in the background and returns its job id at once. The scenario is a table in the "
      "scenario format (docs/simulator.md) or the path of a scenario file on the controller's machine "
      "(relative to its working directory, else to the job file's). It is checked before the job starts: a "
      "wrong field is an error naming it. trials and seed override the scenario's. At most 2 run at once.",
      Role::operate, [job_dir, &jobs](lua_State* L) { return sim_run(job_dir, jobs, L); }});
  add("status", "sim.status([id]) -> {id, state, done, total, events, elapsed_s, eta_s, current, line} | nil",
      "Where a simulation stands (the latest one without id; nil if none was started): state (running, done, "
      "failed, cancelled), trial runs done of the total, events simulated, seconds elapsed and to go, the trial "
      "run last finished, and `line`, a one-line summary. Poll it to follow a run: "
      "salamander repl -e 'return sim.status().line'.",
      Role::observe, [&jobs](lua_State* L) { return sim_status(jobs, L); });
  add("list", "sim.list() -> {{id, state, ...}, ...}",
      "Every simulation kept (the running ones and the last 16 finished), oldest first, as sim.status gives them.",
      Role::observe, [&jobs](lua_State* L) { return sim_list(jobs, L); });
  add("result", "sim.result(id) -> {name, trials, events, points = {{params, strategies = {{label, jct_s, ...}}}}}",
      "The result of a finished simulation, as `salamander sim --json` prints it: per sweep point and strategy "
      "the means and standard errors of jct_s, samples, steps, lost_steps, ettr, availability, failures, "
      "restores, ..., and the goodput series. An error while the job runs, or if it failed or was cancelled.",
      Role::observe, [&jobs](lua_State* L) { return sim_result(jobs, L); });
  add("table", "sim.table(id) -> text",
      "The result of a finished simulation as the text table `salamander sim` prints (rows: sweep points; "
      "columns: strategies; cells: the scenario's metric).",
      Role::observe, [&jobs](lua_State* L) { return sim_table(jobs, L); });
  add("cancel", "sim.cancel(id) -> true | false",
      "Stops a running simulation (true), or does nothing if it had already finished (false). Its state becomes "
      "`cancelled` once the simulator notices, within a moment.",
      Role::operate, [&jobs](lua_State* L) { return sim_cancel(jobs, L); });
}

}  // namespace sal::sim
