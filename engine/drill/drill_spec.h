// drill_spec.h — a failure drill as written: a Lua script (scripts/drills/*.lua) that schedules
// what happens to which nodes and when, and what the run must show. The script runs once, in a
// sandbox, when the drill is loaded; it calls
//
//   drill{name = "...", steps = N, seed = S, duration_s = T}   the drill's name, the steps the
//                                                  job runs, the seed that picks "random" nodes,
//                                                  and how long it trains before the drill stops it
//   kill{node = ID | "random", step = S | at_s = T, during = "forward" | "alltoall" | "allreduce"
//        | "migration", count = K}                 SIGKILL a node; with `during`, its worker dies
//                                                  at that point of the next step (migration: in
//                                                  the next plan switch where it — or, for
//                                                  "random", some node — sends state)
//   kill{expert = E, layer = L, step | at_s}       SIGKILL every node that holds a replica of expert
//                                                  E of layer L (0-based) under the plan in force
//   kill{controller = true, step | at_s, restart_after_s = D}   SIGKILL the controller's process
//                                                  and start `controller --resume` D s later (default
//                                                  1); the run hosts its controller as a child process
//                                                  for such a drill (cli/hosted_run.h), and the drill
//                                                  goes on in the resumed controller
//   drain{node, step | at_s, count}                preemption with notice: the node finishes its step
//   freeze{node, step | at_s, ms, count}           SIGSTOP the node for ms, then SIGCONT
//   crash{node, step | at_s, count}                SIGKILL the node's workers, not its agent (a worker
//                                                  process crashing on a healthy host: its agent
//                                                  starts a new one, mesh.worker_restarts)
//   slow{node, step | at_s, factor, for_s, count}  a gray failure: the node's workers keep `factor`
//                                                  of their CPU quota for for_s seconds (a run with
//                                                  --cpu-share: their cgroups are cut, then restored)
//   corrupt{node, unit, bits, step | at_s}         a fault injector: the node's workers flip `bits`
//                                                  bits of their copy of `unit` ("layer0.expert3",
//                                                  "layer1.dense", "embedding") as the next step
//                                                  begins; refused unless the job allows fault
//                                                  injection (faults = { inject = true })
//   partition{node, step | at_s, for_s, count}     cut the node's network link for for_s seconds
//                                                  (a real cut: the run puts its controller and
//                                                  agents in network namespaces, drill/netns_lab.h)
//   add{count, step | at_s}                        start more nodes (a local mesh)
//   replay_trace{file, format = "bamboo", time_scale, max_nodes, start_s}   (trace.h)
//   expect{lost_steps = N, resume_s = T, min_throughput_share = F, restores = N, min_restores = N}
//
// `args` (a table of strings, from --drill-arg KEY=VALUE) lets one script serve several runs.
// `at_s` counts from the first committed step. Every call is checked: a wrong key, kind or value
// is an error naming the file, the line of the call and the rule.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/model_shape.h"
#include "core/result.h"
#include "wire/messages.h"

namespace sal::drill {

enum class ActionKind { kill, drain, freeze, add, partition, slow, corrupt, crash };
const char* action_name(ActionKind k);

struct Action {
  ActionKind kind = ActionKind::kill;
  std::optional<uint64_t> step;         // after this many committed steps (before step `step` runs)
  std::optional<double> at_s;           // or this long after the first committed step
  std::optional<uint32_t> node;         // none: random live nodes (or the holders below)
  std::optional<std::pair<int, int>> holders_of;  // (layer, expert): every node holding a replica
  std::string rack;                     // kill: every live node the job's mesh.racks puts in this rack
  uint32_t count = 1;
  std::optional<wire::FaultPoint> during;
  bool controller = false;              // kill the controller (restarted after restart_after_s)
  double restart_after_s = 1.0;
  uint64_t ms = 0;                      // freeze; partition and slow (for_s)
  double factor = 1;                    // slow: the share of its CPU quota the node keeps
  std::optional<UnitId> unit;           // corrupt: the unit whose copy is corrupted
  uint32_t bits = 0;                    // corrupt: how many bits are flipped
  std::string where;                    // "drill.lua:12" (or the trace line)
  std::string describe() const;
};

struct Expectations {
  std::optional<uint64_t> lost_steps;   // at most
  std::optional<double> resume_s;       // every recovery at most
  std::optional<double> min_throughput_share;  // tokens/s over the drill / before its first action
  std::optional<uint64_t> restores;     // exactly
  std::optional<uint64_t> min_restores; // at least
};

struct DrillSpec {
  std::string name;
  std::string file;
  std::map<std::string, std::string> args;  // --drill-arg (a resumed controller loads the drill again)
  std::optional<int64_t> steps;
  std::optional<double> duration_s;     // stop the job this long after its first step
  uint64_t seed = 1;
  std::optional<uint32_t> initial_nodes; // the nodes the mesh starts with (a trace's first count)
  // Time triggers (and the duration) count from the drill's start instead of the first committed
  // step: a replayed trace is its own clock (it may start with too few nodes to train at all).
  bool clock_from_start = false;
  // A replayed trace's end (start_s + its scaled span): the duration unless drill{duration_s} says
  // one; and why that end is no duration to train for (a single instant, a drill under 1 s), if so.
  std::optional<double> trace_end_s;
  double trace_time_scale = 0;  // the time scale the trace is replayed at (0: no trace)
  std::string trace_problem;
  std::vector<Action> actions;
  Expectations expect;
  // The first action that kills the controller (such a drill needs a hosted controller), or null.
  const Action* controller_kill() const;
  // Whether it cuts links (such a drill needs its mesh in network namespaces).
  bool partitions() const;
  // Its fault injectors (corrupt{}), which a job must allow; the first, or null.
  const Action* fault_injector() const;
};

// `service` runs every few ms while the script runs (a controller loading a drill keeps serving its
// mesh: drill.start).
Result<DrillSpec> load_drill(const std::string& path, const std::map<std::string, std::string>& args,
                             std::function<void()> service = {});
// Whether the drill may run against this job: a fault injector (corrupt{}) needs the job to allow
// fault injection (faults.inject) and a unit the job's model has. Errors name the drill's line,
// the job's file and the field.
Status check_for_job(const DrillSpec& d, const std::string& job_file, bool faults_allowed, const ModelShape& model);
// The same from the script's text; `path` names it in errors and is where relative trace paths start.
Result<DrillSpec> parse_drill(const std::string& text, const std::string& path,
                              const std::map<std::string, std::string>& args, std::function<void()> service = {});

}  // namespace sal::drill
