// compare_report.cpp — see compare_report.h.
#include "report/compare_report.h"

#include <algorithm>
#include <map>

#include "core/paths.h"
#include "report/html.h"
#include "report/mode_stats.h"
#include "report/report.h"
#include "report/run_marks.h"
#include "report/run_report.h"
#include "report/svg.h"

namespace sal::report {
namespace {

std::optional<double> samples_per_step(const Run& run) {
  auto samples = run.number("samples"), steps = run.number("steps");
  if (!samples || !steps || *steps <= 0) return std::nullopt;
  return *samples / *steps;
}

std::optional<double> ratio(std::optional<double> a, std::optional<double> b) {
  if (!a || !b || *b == 0) return std::nullopt;
  return *a / *b;
}

std::string times(std::optional<double> r) { return r ? num(r, 2) + "×" : kMissing; }

std::string outcome_table(const std::vector<Run>& runs, const std::vector<std::string>& labels) {
  size_t base = baseline_index(runs);
  const std::string on = compared_on(runs);
  auto base_figure = compared_figure(runs[base], on);
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < runs.size(); ++i) {
    const Run& r = runs[i];
    auto samples = r.number("samples");
    std::string vs = times(ratio(compared_figure(r, on), base_figure)) + (i == base ? " (baseline)" : "");
    rows.push_back({"<span style=\"color:" + palette(i) + "\">■</span> " + escape(labels[i]), escape(r.dir),
                    num(r.number("steps")), num(samples), num(r.number("aborted_steps")), num(r.number("patched_steps")),
                    num(r.number("lost_steps")), num(r.number("restores")),
                    seconds(r.number("recovery_p50_s")) + " / " + seconds(r.number("recovery_max_s")),
                    seconds(r.number("elapsed_s")), num(ratio(samples, r.number("elapsed_s")), 1),
                    num(node_seconds(r), 1), num(efficiency(r), 3), vs});
  }
  return table({"run", "directory", "steps", "samples", "aborted steps", "patched steps", "lost steps", "restores",
                "recovery p50 / max", "elapsed", "samples/s", "node-s available", "samples / node-s",
                on + " vs " + escape(labels[base])},
               rows);
}

std::string spread_cell(const Spread& s, int decimals, const std::string& unit = "") {
  if (s.n == 0) return kMissing;
  std::string median = num(s.median, decimals) + unit;
  if (s.n == 1 || s.min == s.max) return median;
  return "<b>" + median + "</b> (" + num(s.min, decimals) + "–" + num(s.max, decimals) + ")";
}

// Per mode, medians and ranges over its runs; "" unless some mode ran more than once.
std::string modes_table(const std::vector<Run>& runs) {
  auto stats = mode_stats(runs);
  if (std::none_of(stats.begin(), stats.end(), [](const ModeStats& s) { return s.runs > 1; })) return "";
  std::vector<std::vector<std::string>> rows;
  for (const auto& s : stats)
    rows.push_back({escape(s.mode), std::to_string(s.runs), spread_cell(s.samples, 0), spread_cell(s.efficiency, 3),
                    spread_cell(s.vs_baseline, 2, "×"), spread_cell(s.elapsed, 1, " s"), spread_cell(s.recovery_max, 2, " s")});
  return section("By mode",
                 table({"mode", "runs", "samples", "samples / node-s",
                        stats.front().compared_on + " vs " + escape(baseline_mode(stats)),
                        "elapsed", "slowest recovery (engine)"},
                       rows),
                 "Medians over each mode's runs, with the range. Samples / node-s: samples trained per node-second the "
                 "run had (each node from its join to its loss). Against the baseline: the k-th run of each mode over "
                 "the k-th of the baseline (the runs alternate modes), the median of those ratios.");
}

std::string samples_chart(const std::vector<Run>& runs, const std::vector<std::string>& labels) {
  BarChart c;
  c.y_label = "samples";
  c.height = 200;
  for (size_t i = 0; i < runs.size(); ++i)
    c.bars.push_back({labels[i], runs[i].number("samples").value_or(0), palette(i), "", runs[i].dir});
  return bar_chart(c);
}

// One series per run over time; `value(i, k)` is the y of run i's metrics row k.
template <class ValueFn>
LineChart overlay(const std::vector<Run>& runs, const std::vector<std::string>& labels, ValueFn value) {
  LineChart c;
  c.x_label = "time since start (s)";
  for (size_t i = 0; i < runs.size(); ++i) {
    Series s{labels[i], palette(i), Draw::Line, false, {}, {}};
    for (size_t k = 0; k < runs[i].metrics.size(); ++k) {
      s.x.push_back(runs[i].metrics[k].time_s);
      s.y.push_back(value(i, k));
    }
    c.series.push_back(std::move(s));
  }
  return c;
}

std::string workers_charts(const std::vector<Run>& runs, const std::vector<std::string>& labels) {
  std::string out;
  for (size_t i = 0; i < runs.size(); ++i) {
    LineChart c;
    c.x_label = "time since start (s)";
    c.y_label = "workers";
    c.y_integer = true;
    c.height = 170;
    Series s{"", palette(i), Draw::Steps, false, {}, {}};
    for (const auto& r : runs[i].metrics) {
      s.x.push_back(r.time_s);
      s.y.push_back(double(r.workers));
    }
    c.series.push_back(std::move(s));
    c.marks = event_marks(runs[i], Axis::time);
    c.spans = recovery_spans(runs[i], Axis::time);
    c.bands = timeline_bands(runs[i].timeline);
    c.legend = mark_legend(c.marks, c.bands, c.spans);
    out += "<h3 style=\"color:" + palette(i) + "\">" + escape(labels[i]) + "</h3>\n" + line_chart(c);
  }
  return out;
}

}  // namespace

size_t baseline_index(const std::vector<Run>& runs) {
  for (size_t i = 0; i < runs.size(); ++i)
    if (runs[i].text("mode") == std::optional<std::string>("checkpoint-restart")) return i;
  return 0;
}

std::vector<std::string> run_labels(const std::vector<Run>& runs) {
  std::vector<std::string> labels;
  std::map<std::string, int> seen;
  for (const auto& r : runs) labels.push_back(r.text("mode").value_or(base_name(r.dir)));
  for (const auto& l : labels) ++seen[l];
  for (size_t i = 0; i < runs.size(); ++i)
    if (seen[labels[i]] > 1) labels[i] += " (" + base_name(runs[i].dir) + ")";
  return labels;
}

std::vector<double> cumulative_samples(const Run& run) {
  double per_step = samples_per_step(run).value_or(1);
  std::vector<double> out;
  double reached = 0;
  uint64_t highest = 0;
  for (size_t k = 0; k < run.metrics.size(); ++k) {
    if (k == 0 || run.metrics[k].step > highest) {
      reached += per_step;
      highest = run.metrics[k].step;
    }
    out.push_back(reached);
  }
  return out;
}

std::string comparison_html(const std::vector<Run>& runs) {
  auto labels = run_labels(runs);
  std::string job = runs.empty() ? "" : runs.front().text("job").value_or("");
  std::string out = page_begin("Salamander comparison" + (job.empty() ? "" : ": " + job));
  out += "<h1>Comparison" + (job.empty() ? "" : ": " + escape(job)) + "</h1>\n<p class=\"sub\">" +
         std::to_string(runs.size()) + " runs" +
         (runs.empty() ? "" : " · drill <b>" + escape(runs.front().text("drill").value_or(kMissing)) + "</b>") +
         "</p>\n";
  if (runs.empty()) return out + page_end();
  out += section("Outcome", outcome_table(runs, labels),
                 "Against the baseline: each run's samples divided by those of the checkpoint-restart run (or of the "
                 "first run when none is) — or, when every run trained the same samples (a drill that stops at a "
                 "step count), its samples per second divided by the baseline's: how much faster it got there.");
  out += modes_table(runs);
  out += section("Samples trained", samples_chart(runs, labels));
  LineChart tput = overlay(runs, labels, [&](size_t i, size_t k) { return runs[i].metrics[k].tokens_per_s; });
  tput.y_label = "tokens/s";
  out += section("Throughput over time", line_chart(tput), "Tokens per second of each committed step.");
  std::vector<std::vector<double>> progress;
  for (const auto& r : runs) progress.push_back(cumulative_samples(r));
  LineChart cum = overlay(runs, labels, [&](size_t i, size_t k) { return progress[i][k]; });
  cum.y_label = "samples";
  out += section("Training progress", line_chart(cum),
                 "Samples trained by each moment: the number of steps that reached a new highest step number "
                 "(steps re-executed after a restore are not counted again) times samples per step (summary "
                 "samples ÷ steps; 1 when the summary lacks them).");
  out +=
      section("Live workers", workers_charts(runs, labels), "Workers in each committed step, with the run's events.");
  return out + page_end();
}

Status write_comparison(const std::vector<std::string>& run_dirs, const std::string& out_html, std::string* mode_table) {
  if (run_dirs.size() < 2) return fail("a comparison needs at least two run directories, got ", run_dirs.size());
  if (out_html.empty()) return fail("a comparison needs an output file");
  std::vector<Run> runs;
  for (const auto& dir : run_dirs) {
    auto run = load_run(dir);
    if (!run) return run.error().with_context("comparison: run " + dir);
    runs.push_back(std::move(*run));
  }
  auto written = write_file(out_html, comparison_html(runs));
  if (!written) return written.error().with_context("comparison");
  auto stats = mode_stats(runs);
  nlohmann::ordered_json j = mode_stats_json(stats);
  j["runs"] = run_dirs;
  const bool html = out_html.size() > 5 && out_html.compare(out_html.size() - 5, 5, ".html") == 0;
  const std::string json_path = (html ? out_html.substr(0, out_html.size() - 5) : out_html) + ".json";
  if (auto s = write_file(json_path, j.dump(2) + "\n"); !s) return s.error().with_context("comparison");
  if (mode_table) *mode_table = mode_stats_text(stats);
  return ok_status();
}

}  // namespace sal::report
