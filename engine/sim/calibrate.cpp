// calibrate.cpp — see calibrate.h. The run's files are read with the report library (engine/report);
// from them come, in turn: the training window (from the first plan put in force to the last
// commit or the stop), the membership replayed as scripted faults over node slots (a node that
// joins takes the slot of one that died and has not come back, or else a new slot that is failed
// from 0 s until it joins), the step-time model (non-negative least squares, by trying every subset
// of its three terms), the recovery costs, and the scenario's text with the fit in a comment atop.
#include "sim/calibrate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/paths.h"
#include "core/strings.h"
#include "job/config.h"
#include "report/run_files.h"

namespace sal::sim {

// The fit's parts (named, not anonymous: the Calibration that holds them is declared in the header).
namespace fit_parts {

// ---- the training window ----

// [start_s, end_s] on the run's clock (seconds since the controller started).
struct Window {
  double start_s = 0, end_s = 0;
  double length() const { return end_s - start_s; }
};

// Training begins when the first plan is in force (a drill's at_s counts from the first commit,
// one step later) and ends at the last commit, or at the stop if the job was stopped after it.
Result<Window> training_window(const report::Run& run) {
  if (run.metrics.empty()) return fail(run.dir, "/metrics.csv: no committed step");
  const auto& first = run.metrics.front();
  Window w;
  w.start_s = run.plans.empty() ? first.time_s - first.step_ms / 1e3 : run.plans.front().time_s;
  w.end_s = run.metrics.back().time_s;
  for (const auto& e : run.events)
    if (e.kind == "stop_requested" && e.time_s > w.end_s) {
      w.end_s = e.time_s;
      break;
    }
  if (w.length() <= 0) return fail(run.dir, ": the run trained for no time");
  return w;
}

// ---- membership: node losses and joins as scripted faults ----

struct FaultOut {
  double at_s = 0;           // since training began
  uint32_t slot = 0;         // the simulator's node id
  double back_after_s = -1;  // < 0: never back
  std::string note;          // which run nodes, for the scenario's comment
};

struct Membership {
  uint32_t initial = 0;  // slots live when training began
  uint32_t slots = 0;    // the simulated cluster: the most nodes ever live at once
  std::vector<FaultOut> faults;
  size_t deaths = 0, joins = 0;
};

// A joined node counts from its first worker being ready (joins are batched from then on).
double ready_time(const std::vector<report::EventRow>& events, size_t joined_at) {
  const auto& j = events[joined_at];
  for (size_t i = joined_at + 1; i < events.size(); ++i)
    if (events[i].kind == "worker_ready" && events[i].node == j.node) return events[i].time_s;
  return j.time_s;
}

class MembershipReplay {
 public:
  explicit MembershipReplay(double start_s) : start_s_(start_s) {}

  void begin(const std::vector<std::string>& live) {
    for (const auto& node : live) slot_of_[node] = m_.slots++;
    m_.initial = m_.slots;
  }

  void joined(const std::string& node, double t) {
    if (slot_of_.count(node)) return;
    double rel = t - start_s_;
    ++m_.joins;
    if (!empty_.empty()) {  // back in the slot of the earliest loss not yet replaced
      FaultOut& f = m_.faults[empty_.front()];
      empty_.erase(empty_.begin());
      f.back_after_s = std::max(0.0, rel - f.at_s);
      f.note += "; node " + node + " joined at " + seconds(rel);
      slot_of_[node] = f.slot;
      return;
    }
    uint32_t slot = m_.slots++;  // a node more than ever before: failed until it joins
    m_.faults.push_back({0.0, slot, rel, "node " + node + " joined at " + seconds(rel)});
    slot_of_[node] = slot;
  }

  void lost(const std::string& node, double t, const std::string& kind) {
    auto it = slot_of_.find(node);
    if (it == slot_of_.end()) return;
    double rel = std::max(0.0, t - start_s_);
    empty_.push_back(m_.faults.size());
    m_.faults.push_back({rel, it->second, -1, "node " + node + " " + (kind == "node_dead" ? "dead" : "left")});
    slot_of_.erase(it);
    ++m_.deaths;
  }

  Membership done() { return m_; }

 private:
  static std::string seconds(double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f s", s);
    return buf;
  }

  double start_s_;
  std::map<std::string, uint32_t> slot_of_;  // live run nodes
  std::vector<size_t> empty_;                // faults whose slot nobody has rejoined
  Membership m_;
};

// The nodes live when training began, in the order they joined.
std::vector<std::string> nodes_at_start(const std::vector<report::EventRow>& events, double start_s) {
  std::vector<std::string> live;
  for (const auto& e : events) {
    if (e.time_s > start_s) break;
    if (e.kind == "node_joined" && std::find(live.begin(), live.end(), e.node) == live.end()) live.push_back(e.node);
    if (report::is_node_loss(e)) live.erase(std::remove(live.begin(), live.end(), e.node), live.end());
  }
  return live;
}

Result<Membership> replay_membership(const report::Run& run, const Window& w) {
  if (run.events.empty()) return fail(run.dir, "/events.csv: missing or empty (the run's joins and losses are there)");
  MembershipReplay replay(w.start_s);
  replay.begin(nodes_at_start(run.events, w.start_s));
  for (size_t i = 0; i < run.events.size(); ++i) {
    const auto& e = run.events[i];
    if (e.time_s <= w.start_s || e.time_s > w.end_s) continue;
    if (e.kind == "node_joined") replay.joined(e.node, ready_time(run.events, i));
    if (report::is_node_loss(e)) replay.lost(e.node, e.time_s, e.kind);
  }
  Membership m = replay.done();
  if (m.initial == 0) return fail(run.dir, "/events.csv: no node had joined when training began");
  return m;
}

// ---- the step-time model ----

struct StepSample {
  double workers = 0, step_s = 0;
};

// One step's time is the interval between two consecutive commits on one plan (a checkpoint's
// pause included); an interval across a plan switch or an aborted step is a recovery, not a step.
std::vector<StepSample> step_samples(const report::Run& run) {
  std::vector<double> aborts;
  for (const auto& e : run.events)
    if (e.kind == "step_aborted") aborts.push_back(e.time_s);
  std::vector<StepSample> out;
  for (size_t i = 1; i < run.metrics.size(); ++i) {
    const auto &a = run.metrics[i - 1], &b = run.metrics[i];
    if (b.plan != a.plan || b.step != a.step + 1 || b.workers != a.workers || b.workers == 0) continue;
    bool aborted = std::any_of(aborts.begin(), aborts.end(), [&](double t) { return t > a.time_s && t <= b.time_s; });
    if (!aborted) out.push_back({double(b.workers), b.time_s - a.time_s});
  }
  return out;
}

// step_s(G) = fixed_s + per_gpu_s·G + dense_s_per_token·tokens/G: the simulator's step model with
// the expert, all-to-all and all-reduce terms absorbed (they are what the fit measures).
struct StepFit {
  double coef[3] = {0, 0, 0};  // fixed_s, per_gpu_s, dense_s_per_token
  double tokens = 0;
  double r2 = 0;
  size_t steps = 0;
  double at(double g) const { return coef[0] + coef[1] * g + coef[2] * tokens / g; }
};

double term(int k, double g, double tokens) { return k == 0 ? 1.0 : k == 1 ? g : tokens / g; }

// Solves the n×n system a·x = b in place (partial pivoting); false when it is singular.
bool solve(std::vector<std::vector<double>>& a, std::vector<double>& b) {
  size_t n = b.size();
  for (size_t c = 0; c < n; ++c) {
    size_t p = c;
    for (size_t r = c + 1; r < n; ++r)
      if (std::abs(a[r][c]) > std::abs(a[p][c])) p = r;
    if (std::abs(a[p][c]) < 1e-300) return false;
    std::swap(a[p], a[c]);
    std::swap(b[p], b[c]);
    for (size_t r = 0; r < n; ++r) {
      if (r == c) continue;
      double f = a[r][c] / a[c][c];
      for (size_t k = c; k < n; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  for (size_t c = 0; c < n; ++c) b[c] /= a[c][c];
  return true;
}

// Least squares on the terms in `use` (normal equations); nullopt when singular.
std::optional<std::vector<double>> least_squares(const std::vector<StepSample>& xs, const std::vector<int>& use,
                                                 double tokens) {
  size_t n = use.size();
  std::vector<std::vector<double>> a(n, std::vector<double>(n, 0.0));
  std::vector<double> b(n, 0.0);
  for (const auto& x : xs)
    for (size_t i = 0; i < n; ++i) {
      double ti = term(use[i], x.workers, tokens);
      b[i] += ti * x.step_s;
      for (size_t j = 0; j < n; ++j) a[i][j] += ti * term(use[j], x.workers, tokens);
    }
  if (!solve(a, b)) return std::nullopt;
  return b;
}

double sum_squares(const std::vector<StepSample>& xs, const StepFit& f) {
  double s = 0;
  for (const auto& x : xs) s += (x.step_s - f.at(x.workers)) * (x.step_s - f.at(x.workers));
  return s;
}

// Non-negative least squares over three terms: every subset of them (no more terms than distinct
// worker counts, so that none is singular) fitted freely; the best fit without a negative
// coefficient wins, a smaller subset on a tie. This is what clamping a negative coefficient to 0
// and refitting converges to.
Result<StepFit> fit_step_model(const std::vector<StepSample>& xs, double tokens) {
  if (xs.empty()) return fail("no two consecutive steps on one plan to time");
  std::set<double> distinct;
  for (const auto& x : xs) distinct.insert(x.workers);
  std::optional<StepFit> best;
  double best_sse = 0;
  for (size_t size = 1; size <= std::min<size_t>(3, distinct.size()); ++size)
    for (int mask = 1; mask < 8; ++mask) {
      std::vector<int> use;
      for (int k = 0; k < 3; ++k)
        if (mask & (1 << k)) use.push_back(k);
      if (use.size() != size) continue;
      auto c = least_squares(xs, use, tokens);
      if (!c || std::any_of(c->begin(), c->end(), [](double v) { return v < 0; })) continue;
      StepFit f;
      f.tokens = tokens;
      for (size_t i = 0; i < use.size(); ++i) f.coef[use[i]] = (*c)[i];
      double sse = sum_squares(xs, f);
      if (!best || sse < best_sse * (1 - 1e-9)) {
        best = f;
        best_sse = sse;
      }
    }
  if (!best) return fail("no non-negative fit of the step times");
  double mean = 0, sst = 0;
  for (const auto& x : xs) mean += x.step_s / double(xs.size());
  for (const auto& x : xs) sst += (x.step_s - mean) * (x.step_s - mean);
  best->r2 = sst > 0 ? 1 - best_sse / sst : 1.0;
  best->steps = xs.size();
  return *best;
}

struct WorkerRow {
  uint64_t workers = 0;
  size_t steps = 0;
  double mean_s = 0;
};

std::vector<WorkerRow> per_worker_count(const std::vector<StepSample>& xs) {
  std::map<uint64_t, WorkerRow> rows;
  for (const auto& x : xs) {
    auto& r = rows[uint64_t(x.workers)];
    r.workers = uint64_t(x.workers);
    r.mean_s += x.step_s;
    ++r.steps;
  }
  std::vector<WorkerRow> out;
  for (auto& [g, r] : rows) out.push_back({g, r.steps, r.mean_s / double(r.steps)});
  return out;
}

// ---- recovery costs ----

struct Costs {
  double rebuild_s = 0;                // each elastic recovery's pause (detect and plan counted in it)
  std::optional<double> restart_s;     // each restore's pause, when the run had one
  double join_batch_s = 1;
  size_t elastic = 0, restores = 0;
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The workers of the first step committed after `t`.
double workers_after(const report::Run& run, double t) {
  for (const auto& m : run.metrics)
    if (m.time_s > t) return double(m.workers);
  return double(run.metrics.back().workers);
}

std::optional<double> number_field(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

// A recovery's seconds run from the loss being noticed to the next commit, which re-ran the lost
// step: the pause is what is left after that step (at the fitted time for the workers it ran on).
std::vector<double> recovery_pauses(const report::Run& run, const StepFit& fit, const std::string& kind) {
  std::vector<double> out;
  auto recs = run.summary.find("recoveries");
  if (recs == run.summary.end() || !recs->is_array()) return out;
  for (const auto& r : *recs) {
    if (!r.is_object() || !r.contains("kind") || r["kind"] != kind) continue;
    auto at = number_field(r, "at_s"), seconds = number_field(r, "seconds");
    if (at && seconds) out.push_back(std::max(0.0, *seconds - fit.at(workers_after(run, *at))));
  }
  return out;
}

// Without a measured recovery: the reconfigurations the timeline shows (joins, rebalances).
double reconfigure_median(const report::Run& run, const Window& w) {
  std::vector<double> d;
  for (const auto& i : run.timeline)
    if (i.phase == "reconfigure" && i.start_s > w.start_s) d.push_back(i.end_s - i.start_s);
  return median(d);
}

Costs fit_costs(const report::Run& run, const Window& w, const StepFit& fit, const job::JobConfig& job) {
  Costs c;
  auto elastic = recovery_pauses(run, fit, "elastic"), restores = recovery_pauses(run, fit, "restore");
  c.elastic = elastic.size();
  c.restores = restores.size();
  c.rebuild_s = elastic.empty() ? reconfigure_median(run, w) : median(elastic);
  if (!restores.empty()) c.restart_s = median(restores);
  c.join_batch_s = double(job.mesh.join_batch_ms) / 1e3;
  return c;
}

// ---- the job and the cluster ----

constexpr const char* kJobLogLine = "ready to train job ";

// The job file the run trained: --job, or the file its workers logged that they trained.
Result<job::JobConfig> run_job(const std::string& dir, const std::optional<std::string>& given) {
  if (given) {
    auto j = job::load_file(*given);
    if (!j) return j.error().with_context("--job");
    return j;
  }
  std::vector<std::string> logs;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))  // the agents' logs, NAME.log
    if (e.path().extension() == ".log" && e.path().filename() != "controller.log" && e.path().filename() != "audit.log")
      logs.push_back(e.path().string());
  std::sort(logs.begin(), logs.end());
  for (const auto& path : logs) {
    auto text = read_file(path);
    if (!text) return text.error();
    auto at = text->find(kJobLogLine);
    if (at == std::string::npos) continue;
    at += std::string(kJobLogLine).size();
    std::string file(trim(std::string_view(*text).substr(at, text->find('\n', at) - at)));
    auto j = file.rfind("<embedded", 0) == 0 ? job::load_embedded_default() : job::load_file(file);
    if (!j) return j.error().with_context(path + " names the job file " + file + " (pass --job JOB.lua)");
    return j;
  }
  return fail(dir, ": no agent's log (NODE.log) says which job file was trained; pass --job JOB.lua");
}

// Workers per node: the most workers ("node.index") one node has in a plan.
uint32_t gpus_per_node(const report::Run& run) {
  uint32_t most = 1;
  for (const auto& p : run.plans) {
    std::map<std::string, uint32_t> per;
    for (const auto& w : p.workers) most = std::max(most, ++per[w.substr(0, w.find('.'))]);
  }
  return most;
}

// ---- the scenario ----

std::string control_escape(unsigned char c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\%03u", unsigned(c));
  return buf;
}

std::string lua_quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += char(c);
    else if (c == '\n') out += "\\n";
    else if (c < 0x20) out += control_escape(c);
    else out += char(c);
  }
  return out + "\"";
}

std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

}  // namespace fit_parts

using namespace fit_parts;

struct Calibration {
  std::string run_dir;
  job::JobConfig job;
  Window window;
  Membership members;
  StepFit fit;
  std::vector<WorkerRow> rows;
  Costs costs;
  uint32_t gpus_per_node = 1;
  double actual_samples = 0;
  int64_t actual_steps = 0;
};

namespace {

std::string header_comment(const Calibration& f) {
  std::string s = "-- Calibration by `salamander sim fit` from the run " + f.run_dir + "\n";
  s += "-- (job '" + f.job.name + "', " + f.job.file + ", recovery " + f.job.train.recovery + ").\n";
  s += "-- It replays that run: the same cluster, its node losses and joins at their times since training\n";
  s += "-- began, and its training wall time as the horizon, so the simulator predicts the samples it trained.\n--\n";
  s += "-- The run trained " + num(f.actual_samples) + " samples (" + std::to_string(f.actual_steps) +
       " committed steps x batch " + std::to_string(f.job.train.batch) + ") in " + num(f.window.length()) +
       " s of training.\n--\n";
  s += "-- Step time, least squares over " + std::to_string(f.fit.steps) + " steps (intervals between commits):\n";
  s += "--   step_s(G) = " + num(f.fit.coef[0]) + " + " + num(f.fit.coef[1]) + " * G + " + num(f.fit.coef[2]) +
       " * " + num(f.fit.tokens) + " / G    R^2 = " + num(f.fit.r2) + "\n";
  s += "--   workers G   steps   mean step s   fitted s\n";
  for (const auto& r : f.rows) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "--   %9llu   %5zu   %11.6f   %8.6f\n", (unsigned long long)r.workers, r.steps,
                  r.mean_s, f.fit.at(double(r.workers)));
    s += buf;
  }
  s += "-- Recoveries: " + std::to_string(f.costs.elastic) + " elastic, " + std::to_string(f.costs.restores) +
       " restores; the median pause after the re-run step is the rebuild (restart) cost.\n";
  if (!f.costs.restart_s) s += "-- No restore was measured: restart_s is the simulator's default.\n";
  return s;
}

std::string faults_text(const Membership& m) {
  std::string s;
  for (const auto& f : m.faults)
    s += "      { at_s = " + num(f.at_s) + ", node = " + std::to_string(f.slot) +
         ", count = 1, back_after_s = " + num(f.back_after_s) + " },  -- " + f.note + "\n";
  return s;
}

// The simulator's strategy for the run's recovery mode: elastic is Salamander; the baselines
// (fixed-ep-ft, checkpoint-restart) have strategies of the same name.
std::string strategy_kind(const job::JobConfig& job) {
  return job.train.recovery == "elastic" ? "salamander" : job.train.recovery;
}

std::string strategy_text(const job::JobConfig& job) {
  std::string ckpt = job.train.checkpoint_every > 0
                         ? "{ kind = \"dense\", every = " + std::to_string(job.train.checkpoint_every) + " }"
                         : "{ kind = \"none\" }";
  std::string kind = lua_quote(strategy_kind(job));
  return "    { kind = " + kind + ", label = " + kind + ", allocation = " + lua_quote(job.policies.allocation) +
         ", placement = " + lua_quote(job.policies.placement) +
         ", min_replicas = " + std::to_string(job.policies.min_replicas) +
         ", rebalance_every = " + std::to_string(job.train.rebalance_every) + ",\n      checkpoint = " + ckpt +
         " },\n";
}

std::string scenario_text(const Calibration& f) {
  const auto& j = f.job;
  std::string s = header_comment(f) + "return {\n";
  s += "  name = " + lua_quote("fit-" + j.name) + ", trials = 1, seed = 1,\n";
  s += "  cluster = { nodes = " + std::to_string(f.members.slots) + ", gpus_per_node = " +
       std::to_string(f.gpus_per_node) + ", slots_per_gpu = " + std::to_string(j.policies.slots) + " },\n";
  s += "  failures = { law = \"none\", faults = {\n" + faults_text(f.members) + "  } },\n";
  s += "  workload = { layers = " + std::to_string(j.model.layers) + ", layer_weight = 1, experts = " +
       std::to_string(j.model.experts) + ", top_k = " + std::to_string(j.model.top_k) +
       ",\n               tokens_per_step = " + num(f.fit.tokens) +
       ", samples_per_step = " + std::to_string(j.train.batch) + " },\n";
  s += "  step = { fixed_s = " + num(f.fit.coef[0]) + ", per_gpu_s = " + num(f.fit.coef[1]) +
       ", dense_s_per_token = " + num(f.fit.coef[2]) +
       ",\n           expert_s_per_token = 0, alltoall_alpha_s = 0, alltoall_s_per_byte = 0, "
       "allreduce_alpha_s = 0, allreduce_s_per_byte = 0 },\n";
  s += "  costs = { detect_s = 0, plan_s = 0, rebuild_s = " + num(f.costs.rebuild_s) +
       (f.costs.restart_s ? ", restart_s = " + num(*f.costs.restart_s) : std::string()) +
       ", join_batch_s = " + num(f.costs.join_batch_s) + " },\n";
  s += "  strategies = {\n" + strategy_text(j) + "  },\n";
  s += "  stop = { horizon_s = " + num(f.window.length()) + " },\n";
  return s + "}\n";
}

nlohmann::ordered_json fitted_json(const Calibration& f, const std::string& path) {
  nlohmann::ordered_json j;
  j["run_dir"] = f.run_dir;
  j["scenario_path"] = path;
  j["actual_samples"] = f.actual_samples;
  j["actual_steps"] = f.actual_steps;
  j["horizon_s"] = f.window.length();
  j["fixed_s"] = f.fit.coef[0];
  j["per_gpu_s"] = f.fit.coef[1];
  j["dense_s_per_token"] = f.fit.coef[2];
  j["tokens_per_step"] = f.fit.tokens;
  j["r2"] = f.fit.r2;
  j["steps_fitted"] = f.fit.steps;
  auto rows = nlohmann::ordered_json::array();
  for (const auto& r : f.rows)
    rows.push_back({{"workers", r.workers}, {"steps", r.steps}, {"mean_s", r.mean_s}, {"fitted_s", f.fit.at(double(r.workers))}});
  j["per_workers"] = rows;
  j["nodes"] = f.members.slots;
  j["initial_nodes"] = f.members.initial;
  j["faults"] = f.members.faults.size();
  j["deaths"] = f.members.deaths;
  j["joins"] = f.members.joins;
  j["rebuild_s"] = f.costs.rebuild_s;
  j["restart_s"] = f.costs.restart_s ? nlohmann::json(*f.costs.restart_s) : nlohmann::json();
  j["join_batch_s"] = f.costs.join_batch_s;
  return j;
}

// The samples the run trained: the summary's, else committed steps × batch from the metrics.
double actual_samples(const report::Run& run, const job::JobConfig& job) {
  if (auto s = run.number("samples")) return *s;
  return double(run.metrics.size()) * double(job.train.batch);
}

Result<Calibration> fit_run(const std::string& dir, const std::optional<std::string>& job_file) {
  auto run = report::load_run(dir);
  if (!run) return run.error();
  if (!path_exists(dir + "/summary.json")) return fail(dir, "/summary.json: missing (the run did not finish)");
  Calibration f;
  f.run_dir = absolute_path(dir);
  auto job = run_job(dir, job_file);
  if (!job) return job.error();
  f.job = std::move(*job);
  auto w = training_window(*run);
  if (!w) return w.error();
  f.window = *w;
  auto members = replay_membership(*run, f.window);
  if (!members) return members.error();
  f.members = std::move(*members);
  auto xs = step_samples(*run);
  auto fit = fit_step_model(xs, double(f.job.train.batch) * double(f.job.model.seq_len));
  if (!fit) return fit.error().with_context(dir + "/metrics.csv");
  f.fit = *fit;
  f.rows = per_worker_count(xs);
  f.costs = fit_costs(*run, f.window, f.fit, f.job);
  f.gpus_per_node = gpus_per_node(*run);
  f.actual_samples = actual_samples(*run, f.job);
  f.actual_steps = int64_t(std::llround(f.actual_samples / double(f.job.train.batch)));
  return f;
}

}  // namespace

Result<std::shared_ptr<const Calibration>> calibrate_run(const std::string& dir,
                                                         const std::optional<std::string>& job_file) {
  auto f = fit_run(dir, job_file);
  if (!f) return f.error();
  return std::shared_ptr<const Calibration>(std::make_shared<Calibration>(std::move(*f)));
}

std::string calibration_scenario(const Calibration& c) { return scenario_text(c); }

nlohmann::ordered_json calibration_json(const Calibration& c, const std::string& scenario_path) {
  return fitted_json(c, scenario_path);
}

std::string calibration_summary(const Calibration& f, const std::string& path) {
  char line[512];
  std::snprintf(line, sizeof line, "%s: %u nodes (%u at the start), %zu losses, %zu joins, %.2f s of training, %.0f samples\n",
                path.c_str(), f.members.slots, f.members.initial, f.members.deaths, f.members.joins, f.window.length(),
                f.actual_samples);
  std::string out = line;
  std::snprintf(line, sizeof line, "  step_s(G) = %.6g + %.6g*G + %.6g*%g/G   R^2 %.4f over %zu steps\n", f.fit.coef[0],
                f.fit.coef[1], f.fit.coef[2], f.fit.tokens, f.fit.r2, f.fit.steps);
  out += line;
  for (const auto& r : f.rows) {
    std::snprintf(line, sizeof line, "  G = %llu: %zu steps, mean %.6f s, fitted %.6f s\n", (unsigned long long)r.workers,
                  r.steps, r.mean_s, f.fit.at(double(r.workers)));
    out += line;
  }
  std::snprintf(line, sizeof line, "  rebuild %.3f s (%zu elastic recoveries), join batch %.3f s\n", f.costs.rebuild_s,
                f.costs.elastic, f.costs.join_batch_s);
  return out + line;
}

}  // namespace sal::sim
