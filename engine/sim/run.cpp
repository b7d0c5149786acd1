// run.cpp — see run.h.
#include "sim/run.h"

#include <chrono>
#include <cmath>
#include <algorithm>
#include <cstdio>
#include <map>

#include "core/json_text.h"
#include "sim/strategy.h"
#include "sim/workload.h"

namespace sal::sim {
namespace {

constexpr int kDefaultBuckets = 50;

Stat stat_of(const std::vector<double>& v) {
  Stat s;
  if (v.empty()) return s;
  for (double x : v) s.mean += x;
  s.mean /= double(v.size());
  if (v.size() > 1) {
    double var = 0;
    for (double x : v) var += (x - s.mean) * (x - s.mean);
    s.se = std::sqrt(var / double(v.size() - 1) / double(v.size()));
  }
  return s;
}

template <class F>
Stat over(const std::vector<TrialResult>& trials, F f) {
  std::vector<double> v;
  for (const auto& t : trials) v.push_back(double(f(t)));
  return stat_of(v);
}

// The commits of a samples log that are kept: a rollback of N samples takes back the newest N
// committed before it, where they were committed (so goodput counts only what training kept, and
// a bucket with a restore in it is not pushed below 0).
std::vector<std::pair<double, double>> kept_commits(const std::vector<std::pair<double, double>>& log) {
  std::vector<std::pair<double, double>> kept;
  for (const auto& [time, amount] : log) {
    if (amount >= 0) {
      kept.emplace_back(time, amount);
      continue;
    }
    for (double undo = -amount; undo > 0 && !kept.empty();) {
      const double take = std::min(undo, kept.back().second);
      kept.back().second -= take;
      undo -= take;
      if (kept.back().second <= 0) kept.pop_back();
    }
  }
  return kept;
}

// Mean of a (time, amount) log per bucket over the trials: as a rate (samples/s, of the commits
// kept) or as a level held until the next entry (live nodes).
std::vector<double> bucketed(const std::vector<TrialResult>& trials, double bucket_s, size_t buckets, bool rate) {
  std::vector<double> sum(buckets, 0.0);
  for (const auto& t : trials) {
    const auto& log = t.live_log;
    if (rate) {
      for (const auto& [time, amount] : kept_commits(t.samples_log))
        if (auto b = size_t(time / bucket_s); b < buckets) sum[b] += amount / bucket_s;
      continue;
    }
    for (size_t i = 0; i < log.size(); ++i) {  // time-weighted level
      double from = log[i].first, to = i + 1 < log.size() ? log[i + 1].first : t.wall_s;
      for (size_t b = size_t(from / bucket_s); b < buckets && double(b) * bucket_s < to; ++b) {
        double lo = std::max(from, double(b) * bucket_s), hi = std::min(to, double(b + 1) * bucket_s);
        if (hi > lo) sum[b] += log[i].second * (hi - lo) / bucket_s;
      }
    }
  }
  for (auto& x : sum) x /= double(std::max<size_t>(1, trials.size()));
  return sum;
}

std::vector<RecoveryPoint> recovery_points(const std::vector<TrialResult>& trials) {
  std::map<int, RecoveryPoint> by_k;
  for (const auto& t : trials)
    for (const auto& f : t.failure_log) {
      if (f.failures_absorbed < 1 || f.p_survive < 0) continue;
      auto& p = by_k[f.failures_absorbed];
      p.k = f.failures_absorbed;
      ++p.failures;
      p.predicted += f.p_survive;
      p.observed += f.outcome != "restored";
    }
  std::vector<RecoveryPoint> out;
  for (auto& [k, p] : by_k) {
    p.predicted /= double(p.failures);
    p.observed /= double(p.failures);
    out.push_back(p);
  }
  return out;
}

StrategySummary summarise(const StrategySpec& spec, const std::vector<TrialResult>& t, double bucket_s, size_t buckets) {
  StrategySummary s;
  s.label = spec.label;
  s.kind = spec.kind;
  s.trials = int(t.size());
  for (const auto& x : t) s.finished += x.finished;
  s.jct_s = over(t, [](const TrialResult& x) { return x.wall_s; });
  s.samples = over(t, [](const TrialResult& x) { return x.samples; });
  s.steps = over(t, [](const TrialResult& x) { return x.steps; });
  s.lost_steps = over(t, [](const TrialResult& x) { return x.lost_steps; });
  s.ettr = over(t, [](const TrialResult& x) { return x.ettr; });
  s.availability = over(t, [](const TrialResult& x) { return x.availability; });
  s.failures = over(t, [](const TrialResult& x) { return x.failures; });
  s.masked = over(t, [](const TrialResult& x) { return x.masked; });
  s.reconfigurations = over(t, [](const TrialResult& x) { return x.reconfigurations; });
  s.restores = over(t, [](const TrialResult& x) { return x.restores; });
  s.plans = over(t, [](const TrialResult& x) { return x.plans; });
  s.plan_ms = over(t, [](const TrialResult& x) { return x.plans ? 1e3 * x.plan_wall_s / double(x.plans) : 0.0; });
  s.bucket_s = bucket_s;
  s.goodput = bucketed(t, bucket_s, buckets, true);
  s.live_nodes = bucketed(t, bucket_s, buckets, false);
  s.recovery = recovery_points(t);
  return s;
}

Result<PointResult> run_point(const Scenario& s, const std::vector<std::pair<std::string, nlohmann::json>>& params,
                              const RunOptions& o, Progress& progress, SimResult& total,
                              std::chrono::steady_clock::time_point t0) {
  PointResult point;
  point.params = params;
  std::vector<std::vector<TrialResult>> trials(s.strategies.size());
  double longest = 0;
  auto w = Workload::make(s);
  if (!w) return fail(s.source, ": ", w.error().message());
  for (size_t i = 0; i < s.strategies.size(); ++i) {
    auto st = make_strategy(s.strategies[i], s);
    if (!st) return fail(s.source, ": ", st.error().message());
    for (int t = 0; t < s.trials; ++t) {
      if (o.cancel && o.cancel->load()) return fail("cancelled");
      auto r = run_trial(s, i, *w, **st, {t, o.cancel});
      if (!r) return fail(s.strategies[i].label, ", trial ", t + 1, ": ", r.error().message());
      longest = std::max(longest, r->wall_s);
      total.events += r->events;
      trials[i].push_back(std::move(*r));
      ++progress.done;
      progress.events = total.events;
      progress.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      progress.current = s.strategies[i].label + ", trial " + std::to_string(t + 1) + "/" + std::to_string(s.trials);
      if (o.progress) o.progress(progress);
    }
  }
  double bucket = s.report.bucket_s > 0 ? s.report.bucket_s : std::max(longest, 1e-9) / kDefaultBuckets;
  auto buckets = size_t(std::ceil(std::max(longest, bucket) / bucket));
  for (size_t i = 0; i < s.strategies.size(); ++i) {
    point.strategies.push_back(summarise(s.strategies[i], trials[i], bucket, buckets));
    point.strategies.back().checkpoint = trials[i].front().checkpoint;
  }
  return point;
}

nlohmann::ordered_json stat_json(const Stat& s) { return {{"mean", s.mean}, {"se", s.se}}; }

std::string value_text(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : json_text(v); }

}  // namespace

const std::vector<std::string>& metric_names() {
  static const std::vector<std::string> kNames = {"jct_s",    "samples",  "steps",    "lost_steps",       "ettr",
                                                  "availability", "failures", "masked", "reconfigurations", "restores",
                                                  "plans",    "plan_ms"};
  return kNames;
}

Result<Stat> metric_of(const StrategySummary& s, const std::string& m) {
  const std::pair<const char*, const Stat*> kStats[] = {
      {"jct_s", &s.jct_s},       {"samples", &s.samples},   {"steps", &s.steps},   {"lost_steps", &s.lost_steps},
      {"ettr", &s.ettr},         {"availability", &s.availability}, {"failures", &s.failures}, {"masked", &s.masked},
      {"reconfigurations", &s.reconfigurations}, {"restores", &s.restores}, {"plans", &s.plans}, {"plan_ms", &s.plan_ms}};
  for (const auto& [name, stat] : kStats)
    if (m == name) return *stat;
  std::string known;
  for (const auto& n : metric_names()) known += (known.empty() ? "" : ", ") + n;
  return fail("table.metric: \"", m, "\" is not a metric (", known, ")");
}

Result<SimResult> run_simulation(const ScenarioFile& f, const RunOptions& o) {
  auto t0 = std::chrono::steady_clock::now();
  SimResult r;
  r.source = f.source;
  r.metric = f.metric;
  r.normalise_to = f.normalise_to;
  if (auto m = metric_of(StrategySummary{}, f.metric); !m) return fail(f.source, ": ", m.error().message());
  auto points = sweep_points(f);
  std::vector<Scenario> scenarios;
  for (const auto& params : points) {
    nlohmann::json j = f.spec;
    for (const auto& [param, value] : params)
      if (auto s = set_param(j, param, value); !s) return fail(f.source, ": sweep: ", s.error().message());
    auto s = read_scenario(j, f.source, f.dir);
    if (!s) return s.error();
    if (o.trials > 0) s->trials = o.trials;
    if (o.seed >= 0) s->seed = uint64_t(o.seed);
    scenarios.push_back(std::move(*s));
  }
  Progress progress;
  for (const auto& s : scenarios) progress.total += s.strategies.size() * size_t(s.trials);
  r.name = scenarios.front().name;
  r.trials = scenarios.front().trials;
  r.seed = scenarios.front().seed;
  for (size_t i = 0; i < scenarios.size(); ++i) {
    auto p = run_point(scenarios[i], points[i], o, progress, r, t0);
    if (!p) return p.error();
    r.points.push_back(std::move(*p));
  }
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

nlohmann::ordered_json result_json(const SimResult& r) {
  nlohmann::ordered_json j{{"name", r.name},   {"source", r.source}, {"metric", r.metric},
                           {"normalise_to", r.normalise_to}, {"trials", r.trials}, {"seed", r.seed},
                           {"events", r.events}, {"wall_s", r.wall_s}};
  j["points"] = nlohmann::ordered_json::array();
  for (const auto& p : r.points) {
    nlohmann::ordered_json pj{{"params", nlohmann::ordered_json::object()}, {"strategies", nlohmann::ordered_json::array()}};
    for (const auto& [k, v] : p.params) pj["params"][k] = v;
    for (const auto& s : p.strategies) {
      nlohmann::ordered_json sj{{"label", s.label}, {"kind", s.kind}, {"checkpoint", s.checkpoint},
                                {"trials", s.trials}, {"finished", s.finished}};
      for (const auto& m : metric_names()) sj[m] = stat_json(*metric_of(s, m));
      sj["bucket_s"] = s.bucket_s;
      sj["goodput"] = s.goodput;
      sj["live_nodes"] = s.live_nodes;
      sj["recovery"] = nlohmann::ordered_json::array();
      for (const auto& rp : s.recovery)
        sj["recovery"].push_back({{"k", rp.k}, {"failures", rp.failures}, {"predicted", rp.predicted}, {"observed", rp.observed}});
      pj["strategies"].push_back(std::move(sj));
    }
    j["points"].push_back(std::move(pj));
  }
  return j;
}

std::string result_table(const SimResult& r) {
  std::string out;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s: %s%s%s, %d trial%s, seed %llu, %llu events in %.2f s\n", r.name.c_str(),
                r.metric.c_str(), r.normalise_to.empty() ? "" : " / ", r.normalise_to.c_str(), r.trials,
                r.trials == 1 ? "" : "s", (unsigned long long)r.seed, (unsigned long long)r.events, r.wall_s);
  out += buf;
  if (r.points.empty()) return out;
  std::snprintf(buf, sizeof buf, "%-28s", r.points.front().params.empty() ? "" : "point");
  out += buf;
  for (const auto& s : r.points.front().strategies) {
    std::snprintf(buf, sizeof buf, " %20s", s.label.c_str());
    out += buf;
  }
  out += "\n";
  for (const auto& p : r.points) {
    std::string name;
    for (const auto& [k, v] : p.params) name += (name.empty() ? "" : " ") + k.substr(k.rfind('.') + 1) + "=" + value_text(v);
    std::snprintf(buf, sizeof buf, "%-28s", name.c_str());
    out += buf;
    double base = 0;
    for (const auto& s : p.strategies)
      if (s.label == r.normalise_to) base = metric_of(s, r.metric)->mean;
    for (const auto& s : p.strategies) {
      auto m = *metric_of(s, r.metric);
      double scale = r.normalise_to.empty() ? 1 : (base != 0 ? 1 / base : NAN);
      if (s.trials > 1 && r.normalise_to.empty()) std::snprintf(buf, sizeof buf, " %11.4g ± %-6.2g", m.mean, m.se);
      else std::snprintf(buf, sizeof buf, " %20.4g", m.mean * scale);
      out += buf;
    }
    out += "\n";
  }
  return out;
}

}  // namespace sal::sim
