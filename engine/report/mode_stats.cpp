// mode_stats.cpp — see mode_stats.h.
#include "report/mode_stats.h"

#include <algorithm>
#include <cstdio>
#include <map>

namespace sal::report {
namespace {

std::string mode_of(const Run& r) { return r.text("mode").value_or(r.dir); }

nlohmann::ordered_json spread_json(const Spread& s) {
  if (s.n == 0) return nullptr;
  return {{"median", s.median}, {"min", s.min}, {"max", s.max}, {"n", s.n}};
}

std::string spread_text(const Spread& s, int decimals, const char* unit = "") {
  if (s.n == 0) return "-";
  char buf[96];
  if (s.n == 1 || s.min == s.max)
    std::snprintf(buf, sizeof buf, "%.*f%s", decimals, s.median, unit);
  else
    std::snprintf(buf, sizeof buf, "%.*f%s [%.*f-%.*f]", decimals, s.median, unit, decimals, s.min, decimals, s.max);
  return buf;
}

// The figures of the runs of each mode, in run order.
std::map<std::string, std::vector<const Run*>> by_mode(const std::vector<Run>& runs, std::vector<std::string>& order) {
  std::map<std::string, std::vector<const Run*>> out;
  for (const auto& r : runs) {
    const std::string m = mode_of(r);
    if (!out.count(m)) order.push_back(m);
    out[m].push_back(&r);
  }
  return out;
}

template <class Fn>
Spread figure(const std::vector<const Run*>& runs, Fn value) {
  std::vector<double> v;
  for (const Run* r : runs)
    if (auto x = value(*r)) v.push_back(*x);
  return spread(std::move(v));
}

}  // namespace

double node_seconds(const Run& run) {
  if (run.events.empty()) return 0;
  const double end = run.number("elapsed_s").value_or(run.events.back().time_s);
  std::map<std::string, double> since;  // live nodes: joined at
  double total = 0;
  for (const auto& e : run.events) {
    if (e.node.empty() || e.time_s > end) continue;
    if (e.kind == "node_joined" && !since.count(e.node)) since[e.node] = e.time_s;
    if (is_node_loss(e) && since.count(e.node)) {
      total += e.time_s - since[e.node];
      since.erase(e.node);
    }
  }
  for (const auto& [node, t] : since) total += std::max(0.0, end - t);
  return total;
}

std::optional<double> efficiency(const Run& run) {
  auto samples = run.number("samples");
  double ns = node_seconds(run);
  if (!samples || ns <= 0) return std::nullopt;
  return *samples / ns;
}

std::string compared_on(const std::vector<Run>& runs) {
  std::optional<double> first;
  for (const auto& r : runs) {
    auto samples = r.number("samples");
    if (!samples || *samples <= 0 || (first && *samples != *first)) return "samples";
    first = samples;
  }
  return runs.size() > 1 ? "samples/s" : "samples";
}

std::optional<double> compared_figure(const Run& run, const std::string& on) {
  auto samples = run.number("samples");
  if (on == "samples" || !samples) return samples;
  auto elapsed = run.number("elapsed_s");
  if (!elapsed || *elapsed <= 0) return std::nullopt;
  return *samples / *elapsed;
}

Spread spread(std::vector<double> v) {
  Spread s;
  s.n = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.min = v.front(), s.max = v.back();
  s.median = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  return s;
}

std::string baseline_mode(const std::vector<ModeStats>& stats) {
  for (const auto& m : stats)
    if (m.mode == "checkpoint-restart") return m.mode;
  return stats.empty() ? "" : stats.front().mode;
}

std::vector<ModeStats> mode_stats(const std::vector<Run>& runs) {
  std::vector<std::string> order;
  auto modes = by_mode(runs, order);
  std::vector<ModeStats> out;
  for (const auto& m : order) {
    const auto& rs = modes[m];
    ModeStats s;
    s.mode = m;
    s.runs = rs.size();
    s.samples = figure(rs, [](const Run& r) { return r.number("samples"); });
    s.efficiency = figure(rs, [](const Run& r) { return efficiency(r); });
    s.elapsed = figure(rs, [](const Run& r) { return r.number("elapsed_s"); });
    s.recovery_max = figure(rs, [](const Run& r) { return r.number("recovery_max_s"); });
    out.push_back(std::move(s));
  }
  const std::string base = baseline_mode(out);
  const std::string on = compared_on(runs);
  for (auto& s : out) {
    const auto& mine = modes[s.mode];
    const auto& theirs = modes[base];
    std::vector<double> ratios;
    for (size_t k = 0; k < std::min(mine.size(), theirs.size()); ++k) {
      auto a = compared_figure(*mine[k], on), b = compared_figure(*theirs[k], on);
      if (a && b && *b > 0) ratios.push_back(*a / *b);
    }
    s.vs_baseline = spread(std::move(ratios));
    s.compared_on = on;
  }
  return out;
}

nlohmann::ordered_json mode_stats_json(const std::vector<ModeStats>& stats) {
  nlohmann::ordered_json out;
  out["baseline"] = baseline_mode(stats);
  out["compared_on"] = stats.empty() ? "samples" : stats.front().compared_on;
  auto modes = nlohmann::ordered_json::array();
  for (const auto& s : stats)
    modes.push_back({{"mode", s.mode},
                     {"runs", s.runs},
                     {"samples", spread_json(s.samples)},
                     {"samples_per_node_s", spread_json(s.efficiency)},
                     {"elapsed_s", spread_json(s.elapsed)},
                     {"recovery_max_s", spread_json(s.recovery_max)},
                     {"vs_baseline", spread_json(s.vs_baseline)}});
  out["modes"] = modes;
  return out;
}

std::string mode_stats_text(const std::vector<ModeStats>& stats) {
  const std::string base = baseline_mode(stats);
  const std::string on = stats.empty() ? "samples" : stats.front().compared_on;
  std::string out = "mode                 runs  samples median [range]      samples/node-s           " + on + " vs " +
                    base + "     slowest recovery (engine)\n";
  for (const auto& s : stats) {
    char line[512];
    std::snprintf(line, sizeof line, "%-20s %4zu  %-27s %-24s %-14s %s\n", s.mode.c_str(), s.runs,
                  spread_text(s.samples, 0).c_str(), spread_text(s.efficiency, 2).c_str(),
                  spread_text(s.vs_baseline, 2, "x").c_str(), spread_text(s.recovery_max, 2, " s").c_str());
    out += line;
  }
  return out;
}

}  // namespace sal::report
