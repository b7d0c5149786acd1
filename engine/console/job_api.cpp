// job_api.cpp — the controller API seen from the REPL (and, later, drills): the `job` module.
// Each function is registered with its signature, doc and least role; help() and completion are
// generated from these entries.
#include <lua.hpp>

#include <functional>

#include "core/clock.h"
#include "core/strings.h"
#include "lua/convert.h"
#include "mesh/controller.h"
#include "console/repl_server.h"

namespace sal::console {

using mesh::Event;
using mesh::Node;
using mesh::NodeState;
using mesh::state_name;
using mesh::WorkerView;
namespace {

const char* worker_state_text(const WorkerView& w) {
  if (w.exited) return "exited";
  switch (w.state) {
    case wire::WorkerState::starting: return "starting";
    case wire::WorkerState::ready: return "ready";
    case wire::WorkerState::draining: return "draining";
    case wire::WorkerState::stopped: return "stopped";
    default: return "?";
  }
}

void push_node(lua_State* L, const Node& n, int64_t now) {
  lua_newtable(L);
  lua::set_field(L, "id", int64_t(n.id));
  lua::set_field(L, "name", n.name);
  lua::set_field(L, "state", state_name(n.state));
  lua::set_field(L, "addr", n.addr);
  lua::set_field(L, "host", n.host);
  lua::set_field(L, "pid", int64_t(n.pid));
  if (!n.slice_endpoint.empty()) lua::set_field(L, "slices", n.slice_endpoint);
  lua::set_field(L, "last_heartbeat_ms", double(now - n.last_heartbeat_ns) / 1e6);
  lua::set_field(L, "since_ms", double(now - n.state_since_ns) / 1e6);
  if (!n.cause.empty()) lua::set_field(L, "cause", n.cause);
  lua_newtable(L);
  for (size_t i = 0; i < n.devices.size(); ++i) {
    lua_pushstring(L, n.devices[i].c_str());
    lua_rawseti(L, -2, int(i + 1));
  }
  lua_setfield(L, -2, "devices");
  lua_newtable(L);
  int k = 1;
  for (const auto& w : n.workers) {
    lua_newtable(L);
    lua::set_field(L, "index", int64_t(w.index));
    lua::set_field(L, "device", w.device);
    lua::set_field(L, "pid", int64_t(w.pid));
    lua::set_field(L, "state", worker_state_text(w));
    if (w.exited) {
      lua::set_field(L, "exit_code", int64_t(w.exit_code));
      lua::set_field(L, "signal", int64_t(w.signal));
    }
    lua_rawseti(L, -2, k++);
  }
  lua_setfield(L, -2, "workers");
}

int job_status(Controller& c, lua_State* L) {
  const auto& m = c.membership();
  const auto& s = c.steps();
  lua_newtable(L);
  lua::set_field(L, "job", c.job().name);
  lua::set_field(L, "epoch", int64_t(m.epoch()));
  lua::set_field(L, "step", int64_t(s.committed()));
  lua::set_field(L, "steps_target", c.max_steps());
  lua::set_field(L, "step_in_flight", s.in_flight());
  lua::set_field(L, "steps_aborted", int64_t(c.aborted_steps()));
  const auto& metrics = c.step_log();
  lua::set_field(L, "phase", job::phase_name(c.driver().phase()));
  if (const auto& plan = c.driver().applied()) lua::set_field(L, "plan", int64_t(plan->number()));
  if (const auto* last = metrics.last()) lua::set_field(L, "loss", last->loss);
  lua::set_field(L, "tokens_per_s", metrics.recent_tokens_per_s(20));
  lua::set_field(L, "uptime_s", double(mono_ns() - c.started_ns()) / 1e9);
  lua::set_field(L, "stopping", c.stopping());
  lua::set_field(L, "mesh", c.mesh_endpoint());
  lua_newtable(L);
  for (auto st : {NodeState::alive, NodeState::suspect, NodeState::draining, NodeState::dead, NodeState::left})
    lua::set_field(L, state_name(st), int64_t(m.count(st)));
  lua_setfield(L, -2, "nodes");
  lua_newtable(L);
  lua::set_field(L, "ready", int64_t(m.ready_workers()));
  lua::set_field(L, "total", int64_t(m.total_workers()));
  lua_setfield(L, -2, "workers");
  return 1;
}

int job_nodes(Controller& c, lua_State* L) {
  int64_t now = mono_ns();
  bool all = lua_toboolean(L, 1);
  lua_newtable(L);
  int k = 1;
  for (const auto& [id, n] : c.membership().nodes()) {
    if (!all && n.state == NodeState::left) continue;
    push_node(L, n, now);
    lua_rawseti(L, -2, k++);
  }
  return 1;
}

int job_events(Controller& c, lua_State* L) {
  int64_t n = lua_isnoneornil(L, 1) ? 50 : lua::check_integer(L, 1, "job.events", "a count");
  const auto& all = c.events().all();
  size_t start = all.size() > size_t(std::max<int64_t>(n, 0)) ? all.size() - size_t(n) : 0;
  lua_newtable(L);
  int k = 1;
  for (size_t i = start; i < all.size(); ++i) {
    const Event& e = all[i];
    lua_newtable(L);
    lua::set_field(L, "seq", int64_t(e.seq));
    lua::set_field(L, "t_s", double(e.mono_ns - c.started_ns()) / 1e9);
    lua::set_field(L, "mono_ns", double(e.mono_ns));
    lua::set_field(L, "kind", e.kind);
    if (e.node != kNoNode) lua::set_field(L, "node", int64_t(e.node));
    if (!e.name.empty()) lua::set_field(L, "name", e.name);
    lua::set_field(L, "epoch", int64_t(e.epoch));
    lua::set_field(L, "detail", e.detail);
    if (e.repeats) lua::set_field(L, "repeats", int64_t(e.repeats));
    lua_rawseti(L, -2, k++);
  }
  return 1;
}

// A node by its id or its name ("node1": its agent's --name, as job.nodes(), job.events(),
// events.csv and its log file call it).
NodeId node_arg(Controller& c, lua_State* L, const char* fn) {
  if (lua_type(L, 1) == LUA_TSTRING) {
    std::string name = lua_tostring(L, 1);
    const auto* n = c.membership().find_by_name(name);
    if (!n) luaL_error(L, "%s: no node named '%s' (job.nodes() lists them)", fn, shown_input(name).c_str());
    return n->id;
  }
  int64_t id = lua::check_integer(L, 1, fn, "a node id or name");
  if (id < 0 || id > int64_t(UINT32_MAX)) luaL_error(L, "%s: no node %d", fn, int(id));
  return NodeId(id);
}

// job.kill / job.drain: one node id in, true out, the controller's refusal as the error.
int node_action(Controller& c, lua_State* L, const char* fn, const std::function<Status(NodeId)>& act) {
  NodeId id = node_arg(c, L, fn);
  if (auto s = act(id); !s) return luaL_error(L, "%s: %s", fn, s.error().message().c_str());
  lua_pushboolean(L, 1);
  return 1;
}

int job_kill(Controller& c, lua_State* L) {
  return node_action(c, L, "job.kill", [&](NodeId id) { return c.kill_node(id, caller(L)); });
}

int job_drain(Controller& c, lua_State* L) {
  return node_action(c, L, "job.drain", [&](NodeId id) { return c.drain_node(id, caller(L)); });
}

int job_stop(Controller& c, lua_State* L) {
  c.request_stop("job.stop() by " + caller(L));
  lua_pushboolean(L, 1);
  return 1;
}

}  // namespace

void register_controller_api(lua::ApiRegistry& reg, Controller& c) {
  reg.add_module("job", "the running job: membership, steps, events, and node actions for drills");
  auto add = [&](const char* name, const char* sig, const char* doc, Role role, ControllerFn fn) {
    add_controller_fn(reg, c, "job", name, sig, doc, role, fn);
  };
  add("status", "job.status() -> {job, epoch, step, nodes = {alive, suspect, ...}, workers = {ready, total}, ...}",
      "Where the job stands: membership epoch, committed steps (and the target), the training phase "
      "and plan in force, the latest loss and tokens/s, node counts by state, ready workers, uptime.",
      Role::observe, job_status);
  add("nodes", "job.nodes([all]) -> {{id, state, addr, devices, last_heartbeat_ms, workers, ...}, ...}",
      "Every node that joined (nodes that left cleanly only with all = true): state (alive, suspect, "
      "draining, dead, left), its cause, connection address, devices, milliseconds since its last "
      "heartbeat, its slice endpoint (slices: where its agent holds sparse snapshots), and its workers.",
      Role::observe, job_nodes);
  add("events", "job.events([n = 50]) -> {{seq, t_s, kind, node, name, epoch, detail}, ...}",
      "The last n events: joins, suspicions, deaths (with their cause), departures, worker exits, "
      "step aborts, operator actions. t_s is seconds since the controller started; node is the node's "
      "id and name its name (as in job.nodes(), events.csv and its log file, NAME.log).",
      Role::observe, job_events);
  add("kill", "job.kill(node) -> true",
      "Kills a node as a drill would: the agent is told to die at once and, on this host, is sent "
      "SIGKILL (its workers die with it). Detection and recovery then run as for a real failure. The node is "
      "its id or its name.",
      Role::operate, job_kill);
  add("drain", "job.drain(node) -> true",
      "Preemption with notice: the node (its id or its name) takes no new steps, its workers finish and "
      "stop, and it leaves cleanly.",
      Role::operate, job_drain);
  add("stop", "job.stop() -> true",
      "Stops the whole job gracefully: agents stop their workers and leave; `salamander run` exits.",
      Role::admin, job_stop);
}

}  // namespace sal::console
