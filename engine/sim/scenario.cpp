// scenario.cpp — reading one scenario (a sweep point) from its JSON, section by section; every
// field is bounded and named in errors. The field list for docs is at the end.
#include "sim/scenario.h"

#include <cmath>

#include "sim/fields.h"
#include "sim/strategy.h"

namespace sal::sim {
namespace {

constexpr double kBig = 1e18;
constexpr double kDay = 86400;

Status read_cluster(const nlohmann::json& j, ClusterSpec& c) {
  Fields f(j, "cluster");
  SAL_TRY(f.count("nodes", c.nodes, 1, 1u << 20));
  SAL_TRY(f.count("gpus_per_node", c.gpus_per_node, 1, 1024));
  SAL_TRY(f.count("slots_per_gpu", c.slots_per_gpu, 1, 1024));
  return f.finish();
}

Status read_law(Fields& f, FailureSpec& out) {
  std::string law = "none";
  SAL_TRY(f.text("law", law, {"none", "exponential", "weibull"}));
  double mtbf = 0, per_hour = 0, shape = 1;
  SAL_TRY(f.number("mtbf_s", mtbf, 0, kBig));
  SAL_TRY(f.number("per_hour", per_hour, 0, 0.999999));
  SAL_TRY(f.number("shape", shape, 0.05, 20));
  if (law == "none") {
    if (mtbf > 0 || per_hour > 0) return fail(f.path("law"), ": mtbf_s/per_hour given but law is \"none\"");
    return {};
  }
  if ((mtbf > 0) == (per_hour > 0)) return fail(f.path("law"), ": give exactly one of mtbf_s and per_hour");
  if (per_hour > 0) {
    if (law != "exponential") return fail(f.path("per_hour"), ": a per-hour probability needs law = \"exponential\"");
    mtbf = 3600 / -std::log1p(-per_hour);
  }
  auto l = law == "weibull" ? weibull(mtbf, shape) : exponential(mtbf);
  if (!l) return fail(f.path("law"), ": ", l.error().message());
  out.law = *l;
  out.source = FailureSpec::Source::law;
  return {};
}

Status read_faults(const nlohmann::json& list, const std::string& path, std::vector<Fault>& out) {
  if (!list.is_array()) return fail(path, ": must be a list of {at_s, node, count, back_after_s}");
  for (size_t i = 0; i < list.size(); ++i) {
    Fields f(list[i], path + "[" + std::to_string(i + 1) + "]");
    if (!list[i].is_object()) return fail(f.path(""), ": must be a table {at_s = ..., node = ...}");
    Fault x;
    SAL_TRY(f.number("at_s", x.at_s, 0, kBig));
    SAL_TRY(f.integer("node", x.node, -1, 1 << 20));
    SAL_TRY(f.count("count", x.count, 1, 1u << 20));
    SAL_TRY(f.number("back_after_s", x.back_after_s, -1, kBig));
    SAL_TRY(f.finish());
    out.push_back(x);
  }
  return {};
}

Status read_failures(const nlohmann::json& j, FailureSpec& out) {
  Fields f(j, "failures");
  SAL_TRY(read_law(f, out));
  SAL_TRY(f.number("repair_s", out.repair_s, -1, kBig));
  SAL_TRY(f.boolean("repair_random", out.repair_random));
  SAL_TRY(f.boolean("spares", out.spares));
  SAL_TRY(f.text("trace", out.trace_path));
  SAL_TRY(f.number("time_scale", out.time_scale, 1e-9, 1e9));
  if (const auto* faults = f.raw("faults")) SAL_TRY(read_faults(*faults, f.path("faults"), out.faults));
  int sources = int(out.source == FailureSpec::Source::law) + int(!out.trace_path.empty()) + int(!out.faults.empty());
  if (sources > 1) return fail("failures: give one source of failures: law, trace or faults");
  if (!out.trace_path.empty()) out.source = FailureSpec::Source::trace;
  if (!out.faults.empty()) out.source = FailureSpec::Source::faults;
  return f.finish();
}

Status read_table(const nlohmann::json& t, const std::string& path, std::vector<std::vector<double>>& out) {
  if (!t.is_array() || t.empty()) return fail(path, ": must be a list of rows (one per layer) of expert loads");
  bool flat = t[0].is_number();
  auto row = [&](const nlohmann::json& r, const std::string& p) -> Status {
    if (!r.is_array() || r.empty()) return fail(p, ": must be a list of numbers");
    std::vector<double> v;
    for (const auto& x : r) {
      if (!x.is_number() || x.get<double>() < 0) return fail(p, ": loads must be numbers >= 0");
      v.push_back(x.get<double>());
    }
    out.push_back(std::move(v));
    return {};
  };
  if (flat) return row(t, path);
  for (size_t i = 0; i < t.size(); ++i) SAL_TRY(row(t[i], path + "[" + std::to_string(i + 1) + "]"));
  return {};
}

Status read_loads(const nlohmann::json& j, const std::string& path, LoadSpec& l) {
  if (j.is_string()) return read_loads(nlohmann::json{{"kind", j}}, path, l);
  Fields f(j, path);
  std::string kind = "uniform";
  SAL_TRY(f.text("kind", kind, {"uniform", "zipf", "hot", "table", "drift", "trace"}));
  static const std::vector<std::pair<std::string, LoadSpec::Kind>> kKinds = {
      {"uniform", LoadSpec::Kind::uniform}, {"zipf", LoadSpec::Kind::zipf}, {"hot", LoadSpec::Kind::hot},
      {"table", LoadSpec::Kind::table},     {"drift", LoadSpec::Kind::drift}, {"trace", LoadSpec::Kind::trace}};
  for (const auto& [name, k] : kKinds)
    if (name == kind) l.kind = k;
  SAL_TRY(f.number("s", l.zipf_s, 0, 10));
  SAL_TRY(f.count("hot_experts", l.hot_experts, 1, 1u << 16));
  SAL_TRY(f.number("factor", l.hot_factor, 1, 1e6));
  SAL_TRY(f.number("per_step", l.drift_per_step, 0, 1));
  SAL_TRY(f.text("path", l.trace_path));
  SAL_TRY(f.integer("every", l.trace_every, 1, int64_t(1) << 40));
  if (const auto* t = f.raw("table")) SAL_TRY(read_table(*t, f.path("table"), l.table));
  if (l.kind == LoadSpec::Kind::table && l.table.empty()) return fail(f.path("table"), ": kind \"table\" needs a table");
  if (l.kind == LoadSpec::Kind::trace && l.trace_path.empty()) return fail(f.path("path"), ": kind \"trace\" needs a path");
  if (l.kind == LoadSpec::Kind::drift && l.drift_per_step <= 0) return fail(f.path("per_step"), ": kind \"drift\" needs per_step > 0");
  return f.finish();
}

Status read_workload(const nlohmann::json& j, WorkloadSpec& w) {
  Fields f(j, "workload");
  SAL_TRY(f.count("layers", w.layers, 1, 1024));
  SAL_TRY(f.number("layer_weight", w.layer_weight, 0, 1e6));
  SAL_TRY(f.count("experts", w.experts, 1, 1u << 16));
  SAL_TRY(f.count("top_k", w.top_k, 1, 1024));
  if (w.top_k > w.experts) return fail(f.path("top_k"), ": must be in 1..experts (", w.experts, "), got ", w.top_k);
  SAL_TRY(f.number("tokens_per_step", w.tokens_per_step, 1, kBig));
  SAL_TRY(f.number("samples_per_step", w.samples_per_step, 1e-9, kBig));
  if (const auto* l = f.raw("loads")) SAL_TRY(read_loads(*l, f.path("loads"), w.loads));
  for (const auto& row : w.loads.table)
    if (row.size() != w.experts)
      return fail(f.path("loads.table"), ": rows must have one load per expert (", w.experts, "), got ", row.size());
  if (!w.loads.table.empty() && w.loads.table.size() != 1 && w.loads.table.size() != w.layers)
    return fail(f.path("loads.table"), ": give one row, or one per layer (", w.layers, "), got ", w.loads.table.size());
  return f.finish();
}

Status read_step(const nlohmann::json& j, StepModel& m) {
  Fields f(j, "step");
  std::pair<const char*, double*> kNonNeg[] = {
      {"fixed_s", &m.fixed_s}, {"per_gpu_s", &m.per_gpu_s}, {"dense_s_per_token", &m.dense_s_per_token},
      {"expert_s_per_token", &m.expert_s_per_token}, {"alltoall_alpha_s", &m.alltoall_alpha_s},
      {"alltoall_s_per_byte", &m.alltoall_s_per_byte}, {"token_bytes", &m.token_bytes},
      {"allreduce_alpha_s", &m.allreduce_alpha_s}, {"allreduce_s_per_byte", &m.allreduce_s_per_byte},
      {"dense_grad_bytes", &m.dense_grad_bytes}, {"shard_s", &m.shard_s},
      {"expert_state_bytes", &m.expert_state_bytes}, {"dense_state_bytes", &m.dense_state_bytes},
      {"expert_weight_bytes", &m.expert_weight_bytes}};
  for (auto [key, ref] : kNonNeg) SAL_TRY(f.number(key, *ref, 0, kBig));
  std::pair<const char*, double*> kRates[] = {{"p2p_Bps", &m.p2p_Bps}, {"ckpt_write_Bps", &m.ckpt_write_Bps},
                                              {"ckpt_read_Bps", &m.ckpt_read_Bps}, {"snapshot_Bps", &m.snapshot_Bps}};
  for (auto [key, ref] : kRates) SAL_TRY(f.number(key, *ref, 1, kBig));
  return f.finish();
}

Status read_costs(const nlohmann::json& j, const std::string& path, RecoveryCosts& c) {
  Fields f(j, path);
  std::pair<const char*, double*> kCosts[] = {{"detect_s", &c.detect_s},   {"plan_s", &c.plan_s},
                                              {"rebuild_s", &c.rebuild_s}, {"restart_s", &c.restart_s},
                                              {"join_batch_s", &c.join_batch_s}, {"mask_s", &c.mask_s}};
  for (auto [key, ref] : kCosts) SAL_TRY(f.number(key, *ref, 0, kBig));
  return f.finish();
}

Status read_checkpoint(const nlohmann::json& j, const std::string& path, CheckpointSpec& c) {
  if (j.is_string()) return read_checkpoint(nlohmann::json{{"kind", j}}, path, c);
  Fields f(j, path);
  std::string kind = "dense";
  SAL_TRY(f.text("kind", kind, {"none", "dense", "oracle", "moc", "moetion"}));
  static const std::vector<std::pair<std::string, CheckpointSpec::Kind>> kKinds = {
      {"none", CheckpointSpec::Kind::none}, {"dense", CheckpointSpec::Kind::dense},
      {"oracle", CheckpointSpec::Kind::oracle}, {"moc", CheckpointSpec::Kind::moc},
      {"moetion", CheckpointSpec::Kind::moetion}};
  for (const auto& [name, k] : kKinds)
    if (name == kind) c.kind = k;
  SAL_TRY(f.integer("every", c.every, 1, int64_t(1) << 40));
  SAL_TRY(f.number("fraction", c.fraction, 1e-6, 1));
  SAL_TRY(f.boolean("in_memory", c.in_memory));
  SAL_TRY(f.number("replay_cost", c.replay_cost, 0, 10));
  SAL_TRY(f.text("policy", c.policy));
  return f.finish();
}

Status read_strategy(const nlohmann::json& j, const std::string& path, const RecoveryCosts& costs, StrategySpec& s) {
  if (j.is_string()) return read_strategy(nlohmann::json{{"kind", j}}, path, costs, s);
  if (!j.is_object()) return fail(path, ": must be a strategy name or a table {kind = ..., ...}");
  Fields f(j, path);
  s.costs = costs;
  SAL_TRY(f.text("kind", s.kind, strategy_kinds()));
  s.label = s.kind;
  SAL_TRY(f.text("label", s.label));
  SAL_TRY(f.text("allocation", s.allocation));
  SAL_TRY(f.text("placement", s.placement));
  SAL_TRY(f.count("min_replicas", s.min_replicas, 1, 1024));
  SAL_TRY(f.integer("rebalance_every", s.rebalance_every, 0, int64_t(1) << 40));
  SAL_TRY(f.count("redundancy", s.redundancy, 0, 1u << 16));
  SAL_TRY(f.text("redundancy_policy", s.redundancy_policy));
  if (s.kind == "checkpoint-only") s.checkpoint.kind = CheckpointSpec::Kind::oracle;
  if (const auto* c = f.raw("checkpoint")) SAL_TRY(read_checkpoint(*c, f.path("checkpoint"), s.checkpoint));
  if (const auto* c = f.raw("costs")) SAL_TRY(read_costs(*c, f.path("costs"), s.costs));
  return f.finish();
}

Status read_strategies(const nlohmann::json* j, const RecoveryCosts& costs, std::vector<StrategySpec>& out) {
  if (!j) return fail("strategies: give at least one strategy, e.g. strategies = {\"salamander\"}");
  if (!j->is_array() || j->empty()) return fail("strategies: must be a non-empty list of strategies");
  for (size_t i = 0; i < j->size(); ++i) {
    StrategySpec s;
    SAL_TRY(read_strategy((*j)[i], "strategies[" + std::to_string(i + 1) + "]", costs, s));
    for (const auto& o : out)
      if (o.label == s.label) return fail("strategies[", i + 1, "]: label \"", s.label, "\" is used twice (set label = ...)");
    out.push_back(std::move(s));
  }
  return {};
}

Status read_stop(const nlohmann::json& j, StopSpec& s) {
  Fields f(j, "stop");
  SAL_TRY(f.integer("steps", s.steps, 0, int64_t(1) << 50));
  SAL_TRY(f.number("samples", s.samples, 0, kBig));
  SAL_TRY(f.number("horizon_s", s.horizon_s, 0, kBig));
  if (s.steps == 0 && s.samples == 0 && s.horizon_s == 0)
    return fail("stop: give steps, samples or horizon_s (when the job is done)");
  if (s.horizon_s == 0) s.horizon_s = 1000 * kDay;
  return f.finish();
}

Status read_report(const nlohmann::json& j, ReportSpec& r) {
  Fields f(j, "report");
  SAL_TRY(f.number("bucket_s", r.bucket_s, 0, kBig));
  SAL_TRY(f.boolean("recovery_probability", r.recovery_probability));
  return f.finish();
}

Status check_cluster_fits(const Scenario& s) {
  for (const auto& f : s.failures.faults)
    if (f.node >= int64_t(s.cluster.nodes))
      return fail("failures.faults: node ", f.node, " is not in the cluster (nodes 0..", s.cluster.nodes - 1, ")");
  return {};
}

}  // namespace

Result<Scenario> read_scenario(const nlohmann::json& spec, const std::string& source, const std::string& dir) {
  Scenario s;
  s.source = source;
  s.dir = dir;
  auto with_source = [&](Status st) -> Status {
    if (!st) return fail(source, ": ", st.error().message());
    return {};
  };
  if (!spec.is_object()) return fail(source, ": a scenario must return a table");
  for (const char* key : {"cluster", "failures", "workload", "step", "costs", "stop", "report"})
    if (spec.contains(key) && !spec[key].is_object() && !(spec[key].is_array() && spec[key].empty()))
      return fail(source, ": ", key, ": must be a table of named fields");
  Fields f(spec, "");
  RecoveryCosts costs;
  int64_t trials = 1, seed = 1;
  if (auto st = with_source([&]() -> Status {
        SAL_TRY(f.text("name", s.name));
        SAL_TRY(f.integer("trials", trials, 1, 1 << 24));
        SAL_TRY(f.integer("seed", seed, 0, INT64_MAX));
        SAL_TRY(read_cluster(spec.value("cluster", nlohmann::json()), s.cluster));
        f.raw("cluster");
        SAL_TRY(read_failures(spec.value("failures", nlohmann::json()), s.failures));
        f.raw("failures");
        SAL_TRY(read_workload(spec.value("workload", nlohmann::json()), s.workload));
        f.raw("workload");
        SAL_TRY(read_step(spec.value("step", nlohmann::json()), s.step));
        f.raw("step");
        if (const auto* c = f.raw("costs")) SAL_TRY(read_costs(*c, "costs", costs));
        SAL_TRY(read_strategies(f.raw("strategies"), costs, s.strategies));
        SAL_TRY(read_stop(spec.value("stop", nlohmann::json()), s.stop));
        f.raw("stop");
        SAL_TRY(read_report(spec.value("report", nlohmann::json()), s.report));
        f.raw("report");
        SAL_TRY(check_cluster_fits(s));
        return f.finish();
      }());
      !st)
    return st.error();
  s.trials = int(trials);
  s.seed = uint64_t(seed);
  return s;
}

const std::vector<FieldDoc>& scenario_fields() {
  static const std::vector<FieldDoc> kDocs = {
      {"name", "scenario name", "the file name"},
      {"trials, seed", "independent runs per strategy and point; the seed of trial t is a function of (seed, t)", "1, 1"},
      {"cluster.nodes / gpus_per_node / slots_per_gpu", "nodes (the unit that fails), GPUs (workers) per node, expert slots per GPU", "8 / 1 / 2"},
      {"failures.law", "none | exponential | weibull: each node's time to failure, drawn afresh whenever it starts", "none"},
      {"failures.mtbf_s | per_hour", "one node's mean time between failures, or the probability it is preempted within an hour", "—"},
      {"failures.shape", "Weibull shape k", "1"},
      {"failures.repair_s, repair_random", "a failed node returns this long after (exponential with that mean when repair_random); absent: never", "never"},
      {"failures.spares", "a restart from a checkpoint brings every failed node back (a spare pool)", "false"},
      {"failures.trace, time_scale", "a spot trace (Bamboo's <ms>,add|remove,<node>, or live-node counts over time) instead of a law; times scaled", "—, 1"},
      {"failures.faults", "a list of {at_s, node (-1: random), count, back_after_s}", "—"},
      {"workload.layers, layer_weight", "MoE layers simulated, and how many real layers each stands for", "1, 1"},
      {"workload.experts, top_k", "experts per layer, experts per token", "8, 2"},
      {"workload.tokens_per_step, samples_per_step", "the global batch in tokens, and in samples", "65536, 32"},
      {"workload.loads", "uniform | {kind=zipf, s} | {kind=hot, hot_experts, factor} | {kind=table, table} | {kind=drift, s, per_step} | {kind=trace, path, every}", "uniform"},
      {"step.*", "the step-time model (seconds, bytes, bytes/s): fixed_s, per_gpu_s, dense_s_per_token, expert_s_per_token, alltoall_alpha_s, alltoall_s_per_byte, token_bytes, allreduce_alpha_s, allreduce_s_per_byte, dense_grad_bytes, shard_s; state sizes expert_state_bytes, dense_state_bytes, expert_weight_bytes; bandwidths p2p_Bps, ckpt_write_Bps, ckpt_read_Bps, snapshot_Bps", "0; shard_s 1; 10e9, 2e9, 2e9, 16e9"},
      {"costs.*", "detect_s, plan_s, rebuild_s, restart_s, join_batch_s, mask_s (defaults for every strategy)", "0.3, 0.05, 0.1, 60, 1, 0.1"},
      {"strategies", "list of names or tables {kind, label, allocation, placement, min_replicas, rebalance_every, redundancy, redundancy_policy, checkpoint = {kind = none|dense|oracle|moc|moetion, every, fraction, in_memory, replay_cost, policy}, costs = {...}}", "—"},
      {"stop.steps | samples, horizon_s", "done after this many steps or samples; cut off at the horizon", "—, 1000 days"},
      {"report.bucket_s, recovery_probability", "goodput series bucket; compute P(placement survives) at each failure", "horizon/50, true"},
      {"sweep", "list of {param = \"a.b\" (or \"strategies.*.x\"), values = {...}}: the cartesian product is run", "—"},
      {"table.metric, normalise_to", "what the table shows (jct_s, samples, ettr, availability, restores, ...) and the strategy label it is divided by", "jct_s, —"},
  };
  return kDocs;
}

}  // namespace sal::sim
