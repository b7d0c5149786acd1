// scenario.h — what a simulation runs: the cluster and how its nodes fail and return, the MoE
// workload and its step-time model, the strategies under test, when the job is done, and what to
// report. A scenario is a Lua file (scripts/experiments/*.lua) returning a table; the table is
// turned into JSON and read here field by field, so a wrong key or value is refused with its path
// ("workload.top_k: must be in 1..experts (8), got 9"). docs/simulator.md lists every field;
// `scenario_fields()` is that list.
//
// Units: seconds, bytes, bytes per second. Nodes fail and return as a whole; a node holds
// `gpus_per_node` GPUs (workers), each with `slots_per_gpu` expert slots. Salamander's plans are made
// over nodes (the unit that fails), with gpus_per_node × slots_per_gpu slots each.
//
// A scenario may sweep parameters: `sweep = {{param = "failures.per_hour", values = {...}}, ...}`
// runs the cartesian product of the axes, each point a copy of the scenario with those values set
// (a path into the table; `strategies.*.redundancy` sets a field of every strategy).
#pragma once

#include <lua.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "sim/failures.h"

namespace sal::sim {

struct ClusterSpec {
  uint32_t nodes = 8;
  uint32_t gpus_per_node = 1;
  uint32_t slots_per_gpu = 2;
  uint32_t gpus() const { return nodes * gpus_per_node; }
};

// One scripted fault: at `at_s`, `count` nodes fail (node ≥ 0: that node; −1: random live nodes,
// drawn from the trial's generator); with back_after_s ≥ 0 they return that long after.
struct Fault {
  double at_s = 0;
  int64_t node = -1;
  uint32_t count = 1;
  double back_after_s = -1;
};

struct FailureSpec {
  enum class Source { none, law, trace, faults } source = Source::none;
  // law: each node's time to failure, drawn afresh whenever it (re)starts.
  FailureLaw law;
  // A failed node returns after repair_s (< 0: never); exponential with that mean when
  // repair_random, else exactly.
  double repair_s = -1;
  bool repair_random = false;
  // A restart from a checkpoint brings every failed node back (replacements from a spare pool),
  // as a job restarted by its scheduler would get.
  bool spares = false;
  // trace: any format sim/trace.h tells apart (Bamboo's "<ms>,add|remove,<node>", or live-node
  // counts over time, numeric times in seconds); trace node names map to node ids in order of
  // first appearance; times are multiplied by time_scale.
  std::string trace_path;
  double time_scale = 1;
  // faults: an explicit list.
  std::vector<Fault> faults;
};

// Expert loads: each layer's share of routed tokens per expert (normalised to sum 1).
struct LoadSpec {
  enum class Kind { uniform, zipf, hot, table, drift, trace } kind = Kind::uniform;
  double zipf_s = 1;             // zipf: share ∝ 1/(rank+1)^s, ranks shuffled per layer
  uint32_t hot_experts = 1;      // hot: the first hot_experts are `hot_factor` times as loaded
  double hot_factor = 4;
  std::vector<std::vector<double>> table;  // table: [layer][expert] (a single row is used for every layer)
  double drift_per_step = 0;     // drift: zipf whose ranks rotate by one every 1/drift_per_step steps
  std::string trace_path;        // trace: a loads file (CSV or SmartMoE) or a directory of them
  int64_t trace_every = 1;       // trace: steps each file of a directory stands for
};

struct WorkloadSpec {
  uint32_t layers = 1;          // MoE layers planned and simulated
  double layer_weight = 1;      // each simulated layer stands for this many real ones (step time)
  uint32_t experts = 8;
  uint32_t top_k = 2;
  double tokens_per_step = 65536;  // the global batch, in tokens; never changes with membership
  double samples_per_step = 32;    // what "samples" counts
  LoadSpec loads;
};

// The step-time model (workload.h computes it from a plan):
//   step = fixed_s + per_gpu_s · live_gpus + dense_s_per_token · tokens / live_gpus
//        + layer_weight · Σ_layers [ expert_s_per_token · busiest node's routed tokens / gpus_per_node
//                                    + 4 (alltoall_alpha_s + alltoall_s_per_byte · token_bytes · routed tokens per GPU) ]
//        + allreduce_alpha_s + allreduce_s_per_byte · 2 · dense_grad_bytes
// The stacked strategies (SPARe, replication, checkpoint-only) use
//   step = fixed_s + depth · shard_s + allreduce
// where depth is the rounds a group computes (1 without redundancy, r for replication).
struct StepModel {
  double fixed_s = 0;
  double per_gpu_s = 0;  // grows with the GPUs in the job: ring latency; on an oversubscribed host, contention
  double dense_s_per_token = 0;
  double expert_s_per_token = 0;
  double alltoall_alpha_s = 0;
  double alltoall_s_per_byte = 0;
  double token_bytes = 0;
  double allreduce_alpha_s = 0;
  double allreduce_s_per_byte = 0;
  double dense_grad_bytes = 0;
  double shard_s = 1;
  // State sizes, for migration and checkpoints.
  double expert_state_bytes = 0;   // one expert's weights + optimizer state
  double dense_state_bytes = 0;    // all non-expert state
  double expert_weight_bytes = 0;  // one expert's compute weights (MoEtion's frozen operators)
  double p2p_Bps = 10e9;           // migration bandwidth into one node
  double ckpt_write_Bps = 2e9;     // per node, to the checkpoint store
  double ckpt_read_Bps = 2e9;      // per node, from the checkpoint store
  double snapshot_Bps = 16e9;      // device to host (in-memory snapshots)
};

// Fixed costs of recovery actions (seconds).
struct RecoveryCosts {
  double detect_s = 0.3;     // failure noticed
  double plan_s = 0.05;      // policies + remap (Salamander); measured calls are reported beside
  double rebuild_s = 0.1;    // collectives rebuilt
  double restart_s = 60;     // a restart from a checkpoint: relaunch, rendezvous (reading the state is extra)
  double join_batch_s = 1;   // joins are taken into a plan this long after the first of them
  double mask_s = 0.1;       // SPARe: reorder + patch compute of the in-flight step
};

struct CheckpointSpec {
  enum class Kind { none, dense, oracle, moc, moetion } kind = Kind::dense;
  int64_t every = 100;       // dense, moc: steps between checkpoints
  double fraction = 0.25;    // moc: share of experts saved per checkpoint
  bool in_memory = false;    // dense/oracle/moc: to host memory (snapshot_Bps, no reload) instead of the store
  double replay_cost = 0.67; // moetion: a replayed iteration (frozen operators) relative to a full one
  std::string policy = "moetion";  // moetion: the checkpoint policy that chooses the window
};

struct StrategySpec {
  std::string label;               // column name (default: kind)
  std::string kind = "salamander"; // salamander | checkpoint-restart | fixed-ep-ft | spare | replication | checkpoint-only
  std::string allocation = "lazarus";
  std::string placement = "mro";
  uint32_t min_replicas = 2;       // f
  int64_t rebalance_every = 0;     // steps between load-driven re-plans (0: on membership changes only)
  uint32_t redundancy = 0;         // spare, replication: r (0: SPARe's r* = floor(log2 N + 0.833))
  std::string redundancy_policy = "spare";
  CheckpointSpec checkpoint;
  RecoveryCosts costs;
};

struct StopSpec {
  int64_t steps = 0;        // done after this many committed steps, or
  double samples = 0;       // this many samples, and in any case at
  double horizon_s = 0;     // this wall time (the job is cut off; 0: 1000 days)
};

struct ReportSpec {
  double bucket_s = 0;            // goodput series bucket (0: horizon / 50)
  bool recovery_probability = true;  // Salamander: P(placement survives) at each failure
};

struct Scenario {
  std::string name;
  std::string source;              // file or "<repl>", for messages
  std::string dir;                 // relative paths (traces) resolve here
  ClusterSpec cluster;
  FailureSpec failures;
  WorkloadSpec workload;
  StepModel step;
  std::vector<StrategySpec> strategies;
  StopSpec stop;
  ReportSpec report;
  int trials = 1;
  uint64_t seed = 1;

  // A path of the scenario (a trace, a loads file) as given, or relative to its directory.
  std::string resolve(const std::string& path) const { return path.empty() || path[0] == '/' ? path : dir + "/" + path; }
};

struct SweepAxis {
  std::string param;                 // "failures.per_hour", "strategies.*.redundancy"
  std::vector<nlohmann::json> values;
};

// A scenario as written, before sweep points are applied.
struct ScenarioFile {
  nlohmann::json spec;               // the table, as JSON, without `sweep` and `table`
  std::vector<SweepAxis> axes;
  std::string metric = "jct_s";      // what the table shows: jct_s | samples | ettr | availability | restarts | ...
  std::string normalise_to;          // a strategy label: cells are divided by its value
  std::string source, dir;
  std::vector<std::string> notes;    // what loading changed that the user should be told (a --set over a sweep)
};

// Runs a Lua scenario file (sandboxed, like a job file) and reads its table. `--set k=v` style
// overrides (path = JSON value text) are applied before reading; an override of a field a sweep
// varies replaces that sweep with its one value (a note says so), so --set always wins.
Result<ScenarioFile> load_scenario_file(const std::string& path,
                                        const std::vector<std::pair<std::string, std::string>>& overrides = {});
// The same from a table already in JSON (the REPL's sim.run{...}).
Result<ScenarioFile> scenario_file_from_json(nlohmann::json spec, const std::string& source, const std::string& dir);
// A scenario table read from a Lua state as JSON, raw and counted (lua/convert.h): its values are
// at most a scenario's limit, and the read polls the budget of the call running in L.
Result<nlohmann::json> scenario_json(lua_State* L, int idx);

// Sets `value` at `param` (dotted path; `*` over an array); errors name the path.
Status set_param(nlohmann::json& spec, const std::string& param, const nlohmann::json& value);
// The points of the sweep: each a list of (param, value); one empty point without axes.
std::vector<std::vector<std::pair<std::string, nlohmann::json>>> sweep_points(const ScenarioFile& f);
// Reads a scenario (one point) from its JSON; errors name the source and the field.
Result<Scenario> read_scenario(const nlohmann::json& spec, const std::string& source, const std::string& dir);

// Every field: path, meaning, default — for docs and `salamander sim --fields`.
struct FieldDoc {
  std::string path, doc, fallback;
};
const std::vector<FieldDoc>& scenario_fields();

}  // namespace sal::sim
