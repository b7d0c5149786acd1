// run_report.cpp — see run_report.h. Each section is built by one function from the Run; sections
// whose file was missing (or held nothing) are left out.
#include "report/run_report.h"

#include <algorithm>
#include <map>

#include "core/paths.h"
#include "core/strings.h"
#include "report/html.h"
#include "report/report.h"

namespace sal::report {
namespace {

struct MarkStyle {
  const char* kind;
  const char* label;
  const char* color;
  bool tick;
};

const MarkStyle kFailure{"failure", "failure", "#d32f2f", false};
const MarkStyle kRecovered{"recovered", "recovered", "#2e7d32", false};
const MarkStyle kRestore{"restore", "restore begun", "#ef6c00", false};
const MarkStyle kDrill{"drill", "drill action", "#7b1fa2", true};
const MarkStyle kJobFailed{"job-failed", "job failed", "#000000", false};
const MarkStyle* const kMarkStyles[] = {&kFailure, &kRecovered, &kRestore, &kDrill, &kJobFailed};

struct BandStyle {
  const char* phase;
  const char* label;
  const char* color;
};
const BandStyle kBandStyles[] = {{"reconfigure", "reconfiguration", "#fff0a0"}, {"restore", "restore", "#ffd5a8"}};

const char* phase_color(const std::string& phase) {
  static const std::map<std::string, const char*> kColors = {{"compute", "#9ecae1"},
                                                             {"reconfigure", "#ffe066"},
                                                             {"restore", "#ffa94d"},
                                                             {"wait", "#ced4da"},
                                                             {"save", "#b197fc"}};
  auto it = kColors.find(phase);
  return it == kColors.end() ? "#e9c46a" : it->second;
}

std::string or_missing(const std::optional<std::string>& s) { return s ? escape(*s) : kMissing; }

std::string json_text(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return kMissing;
  return escape(it->is_string() ? it->get<std::string>() : it->dump());
}

// The objects in the summary's array `key` (none when it is missing or not an array).
std::vector<nlohmann::json> summary_objects(const Run& run, const char* key) {
  std::vector<nlohmann::json> out;
  auto list = run.summary.find(key);
  if (list == run.summary.end() || !list->is_array()) return out;
  for (const auto& item : *list)
    if (item.is_object()) out.push_back(item);
  return out;
}

std::optional<double> json_number(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

// ---- title and summary ----

std::string title_block(const Run& run) {
  std::string job = run.text("job").value_or(base_name(run.dir));
  std::string out = "<h1>Run report: " + escape(job) + "</h1>\n";
  out += "<p class=\"sub\">mode <b>" + or_missing(run.text("mode")) + "</b> · drill <b>" +
         or_missing(run.text("drill")) + "</b> · " + escape(run.dir) + "</p>\n";
  return out;
}

std::string loss_text(const Run& run) {
  auto first = run.number("first_loss"), last = run.number("final_loss");
  if (!first && !run.metrics.empty()) first = run.metrics.front().loss;
  if (!last && !run.metrics.empty()) last = run.metrics.back().loss;
  return num(first, 4) + " → " + num(last, 4);
}

std::string summary_section(const Run& run) {
  std::string count =
      run.summary.contains("recoveries") ? std::to_string(summary_objects(run, "recoveries").size()) : kMissing;
  std::vector<std::vector<std::string>> rows = {
      {"steps", num(run.number("steps"))},
      {"samples", num(run.number("samples"))},
      {"lost steps", num(run.number("lost_steps"))},
      {"restores", num(run.number("restores"))},
      {"recoveries", count + " (p50 " + seconds(run.number("recovery_p50_s")) + ", max " +
                         seconds(run.number("recovery_max_s")) + ")"},
      {"elapsed", seconds(run.number("elapsed_s"))},
      {"tokens/s", num(run.number("tokens_per_s"), 1)},
      {"loss first → last", loss_text(run)},
      {"exit code", num(run.number("exit_code"))},
  };
  if (auto failure = run.text("failure")) rows.push_back({"failure", escape(*failure)});
  return section("Summary", table({}, rows));
}

std::string expectations_section(const Run& run) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& e : summary_objects(run, "expectations")) {
    auto ok = e.find("ok");
    rows.push_back({json_text(e, "what"), ok != e.end() && ok->is_boolean() ? pass_fail(ok->get<bool>()) : kMissing,
                    json_text(e, "detail")});
  }
  if (rows.empty()) return "";
  return section("Expectations", table({"expectation", "result", "detail"}, rows));
}

// ---- plots ----

std::vector<Mark> event_marks(const Run& run) {
  std::vector<Mark> marks;
  for (const auto& e : run.events)
    if (auto m = event_mark(e)) marks.push_back(*m);
  return marks;
}

std::string throughput_section(const Run& run) {
  if (run.metrics.empty()) return section("Throughput", "<p>No steps were committed.</p>\n");
  LineChart c;
  c.x_label = "time since start (s)";
  c.y_label = "tokens/s";
  c.y2_label = "live workers";
  Series tput{"tokens/s", "#1f77b4", Draw::Line, false, {}, {}};
  Series workers{"live workers", "#555555", Draw::Steps, true, {}, {}};
  for (const auto& r : run.metrics) {
    tput.x.push_back(r.time_s);
    tput.y.push_back(r.tokens_per_s);
    workers.x.push_back(r.time_s);
    workers.y.push_back(double(r.workers));
  }
  c.series = {tput, workers};
  c.marks = event_marks(run);
  c.bands = timeline_bands(run.timeline);
  c.legend = mark_legend(c.marks, c.bands);
  return section("Throughput", line_chart(c),
                 "Tokens per second of each committed step against time, with the live workers (right axis). "
                 "Vertical lines mark events; hover them for details.");
}

std::string loss_section(const Run& run) {
  if (run.metrics.empty()) return "";
  LineChart c;
  c.x_label = "time since start (s)";
  c.y_label = "loss";
  c.y_from_zero = false;
  Series loss{"loss", "#1f77b4", Draw::Line, false, {}, {}};
  Series redone{"re-executed step (after a restore)", "#e8590c", Draw::Points, false, {}, {}};
  bool any = false;
  uint64_t highest = 0;
  for (const auto& r : run.metrics) {
    loss.x.push_back(r.time_s);
    loss.y.push_back(r.loss);
    if (any && r.step <= highest) {
      redone.x.push_back(r.time_s);
      redone.y.push_back(r.loss);
    }
    highest = any ? std::max(highest, r.step) : r.step;
    any = true;
  }
  c.series = {loss};
  if (!redone.x.empty()) c.series.push_back(redone);
  c.bands = timeline_bands(run.timeline);
  c.legend = mark_legend({}, c.bands);
  return section("Loss", line_chart(c),
                 "Training loss of each committed step in the order it was committed; steps run again after a "
                 "checkpoint restore are drawn as points. Event marks are on the throughput plot.");
}

std::string phases_section(const Run& run) {
  if (run.timeline.empty()) return "";
  std::vector<std::string> order = {"compute", "reconfigure", "restore", "wait", "save"};
  std::map<std::string, double> total;
  for (const auto& iv : run.timeline) {
    total[iv.phase] += std::max(iv.end_s - iv.start_s, 0.0);
    if (std::find(order.begin(), order.end(), iv.phase) == order.end()) order.push_back(iv.phase);
  }
  std::vector<Segment> segments;
  for (const auto& phase : order)
    if (total.count(phase)) segments.push_back({phase, total[phase], phase_color(phase)});
  return section("Time per phase", stacked_bar(segments, "s"),
                 "Seconds spent in each phase (sum of the intervals in timeline.csv) and their share of the total.");
}

// ---- plans ----

size_t expert_count(const PlanRecord& p) {
  size_t n = 0;
  for (const auto& layer : p.loads) n = std::max(n, layer.size());
  for (const auto& layer : p.placement)
    for (const auto& rank : layer)
      for (int64_t e : rank) n = std::max(n, size_t(std::max<int64_t>(e, 0)) + 1);
  return n;
}

std::vector<size_t> replica_counts(const PlanRecord& p, size_t layer, size_t experts) {
  std::vector<size_t> out(experts, 0);
  if (layer >= p.placement.size()) return out;
  for (const auto& rank : p.placement[layer])
    for (int64_t e : rank)
      if (e >= 0 && size_t(e) < experts) ++out[size_t(e)];
  return out;
}

std::string layer_loads(const PlanRecord& p, size_t layer, size_t experts) {
  auto replicas = replica_counts(p, layer, experts);
  bool has_loads = layer < p.loads.size() && !p.loads[layer].empty();
  BarChart c;
  c.y_label = has_loads ? "tokens/step" : "replicas";
  c.height = 190;
  for (size_t e = 0; e < experts; ++e) {
    double load = has_loads && e < p.loads[layer].size() ? p.loads[layer][e] : 0;
    c.bars.push_back({std::to_string(e), has_loads ? load : double(replicas[e]), expert_color(e, experts),
                      "×" + std::to_string(replicas[e]), std::to_string(replicas[e]) + " replica(s)"});
  }
  return "<h3>layer " + std::to_string(layer) + "</h3>\n" + bar_chart(c);
}

std::string loads_section(const Run& run) {
  if (run.plans.empty()) return "";
  const PlanRecord& p = run.plans.back();
  size_t experts = expert_count(p);
  size_t layers = std::max(p.loads.size(), p.placement.size());
  if (experts == 0 || layers == 0) return "";
  std::string body;
  for (size_t l = 0; l < layers; ++l) body += layer_loads(p, l, experts);
  bool any_loads = std::any_of(p.loads.begin(), p.loads.end(), [](const auto& l) { return !l.empty(); });
  std::string caption = "Plan " + std::to_string(p.plan) + " (the last): " +
                        (any_loads ? "mean tokens per step routed to each expert in the window the plan was made from"
                                   : "this plan carried no loads; bars show replica counts") +
                        "; under each expert id its replica count in the plan.";
  return section("Expert loads", body, caption);
}

std::string placement_section(const Run& run) {
  if (run.plans.empty() || run.plans.back().placement.empty()) return "";
  const PlanRecord& p = run.plans.back();
  size_t experts = expert_count(p);
  std::string body;
  for (size_t l = 0; l < p.placement.size(); ++l) {
    Grid g;
    for (size_t r = 0; r < p.placement[l].size(); ++r) {
      std::string worker = r < p.workers.size() ? p.workers[r] : "rank " + std::to_string(r);
      g.row_labels.push_back(worker);
      std::vector<Cell> cells;
      for (size_t s = 0; s < p.placement[l][r].size(); ++s) {
        int64_t e = p.placement[l][r][s];
        cells.push_back({std::to_string(e), e >= 0 ? expert_color(size_t(e), experts) : "#eeeeee",
                         "layer " + std::to_string(l) + ", worker " + worker + ", slot " + std::to_string(s) +
                             ": expert " + std::to_string(e)});
      }
      g.rows.push_back(std::move(cells));
    }
    body += "<h3>layer " + std::to_string(l) + "</h3>\n" + grid_chart(g);
  }
  return section("Expert placement", body,
                 "Plan " + std::to_string(p.plan) +
                     ": one row per worker, one cell per expert slot holding that "
                     "expert's id (same color = same expert).");
}

std::string plans_section(const Run& run) {
  if (run.plans.empty()) return "";
  std::vector<std::vector<std::string>> rows;
  for (const auto& p : run.plans) {
    std::vector<std::string> workers;
    for (const auto& w : p.workers) workers.push_back(escape(w));
    rows.push_back({std::to_string(p.plan), std::to_string(p.step), num(p.time_s, 2),
                    std::to_string(p.workers.size()) + (workers.empty() ? "" : ": " + join(workers, ", "))});
  }
  return section("Plans", table({"plan", "step", "time (s)", "workers"}, rows));
}

// ---- tables ----

std::string recoveries_section(const Run& run) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : summary_objects(run, "recoveries"))
    rows.push_back({std::to_string(rows.size() + 1), json_text(r, "cause"), json_text(r, "kind"), json_text(r, "step"),
                    seconds(json_number(r, "seconds"))});
  if (rows.empty()) return "";
  return section("Recoveries", table({"#", "cause", "kind", "step", "time to recover"}, rows));
}

std::string events_section(const Run& run) {
  if (run.events.empty()) return "";
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> classes;
  for (const auto& e : run.events) {
    rows.push_back({num(e.time_s, 3), escape(e.kind), escape(e.node), escape(e.detail)});
    classes.push_back(is_failure(e) ? "failure" : e.kind == "recovered" ? "recovery" : "");
  }
  return section("Events", table({"time (s)", "kind", "node", "detail"}, rows, classes),
                 "Every event the controller logged, on the same clock as the plots.");
}

}  // namespace

std::optional<Mark> event_mark(const EventRow& e) {
  const MarkStyle* style = is_failure(e)               ? &kFailure
                           : e.kind == "recovered"     ? &kRecovered
                           : e.kind == "restore_begun" ? &kRestore
                           : e.kind == "drill"         ? &kDrill
                           : e.kind == "job_failed"    ? &kJobFailed
                                                       : nullptr;
  if (!style) return std::nullopt;
  std::string where = e.node.empty() ? "" : " node " + e.node;
  return Mark{e.time_s,
              style->kind,
              style->color,
              num(e.time_s, 2) + " s  " + e.kind + where + ": " + e.detail,
              style != &kJobFailed,
              style->tick};
}

std::vector<LegendItem> mark_legend(const std::vector<Mark>& marks, const std::vector<Band>& bands) {
  std::vector<LegendItem> items;
  for (const MarkStyle* s : kMarkStyles)
    if (std::any_of(marks.begin(), marks.end(), [&](const Mark& m) { return m.kind == s->kind; }))
      items.push_back({s->label, s->color, s->tick ? Swatch::Tick : s == &kJobFailed ? Swatch::Line : Swatch::Dashed});
  for (const BandStyle& s : kBandStyles)
    if (std::any_of(bands.begin(), bands.end(), [&](const Band& b) { return b.kind == s.phase; }))
      items.push_back({s.label, s.color, Swatch::Box});
  return items;
}

std::vector<Band> timeline_bands(const std::vector<Interval>& timeline) {
  std::vector<Band> bands;
  for (const auto& iv : timeline)
    for (const BandStyle& s : kBandStyles)
      if (iv.phase == s.phase)
        bands.push_back({iv.start_s, iv.end_s, s.phase, s.color,
                         iv.phase + " " + num(iv.start_s, 2) + "–" + num(iv.end_s, 2) + " s" +
                             (iv.detail.empty() ? "" : ": " + iv.detail)});
  return bands;
}

std::string base_name(const std::string& dir) {
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  auto slash = d.rfind('/');
  return slash == std::string::npos ? d : d.substr(slash + 1);
}

std::string run_report_html(const Run& run) {
  std::string job = run.text("job").value_or(base_name(run.dir));
  return page_begin("Salamander run report: " + job) + title_block(run) + summary_section(run) +
         expectations_section(run) + throughput_section(run) + loss_section(run) + phases_section(run) +
         loads_section(run) + placement_section(run) + plans_section(run) + recoveries_section(run) +
         events_section(run) + page_end();
}

Status write_run_report(const std::string& run_dir, const std::string& out_html) {
  std::string out = out_html.empty() ? run_dir + "/report.html" : out_html;
  auto run = load_run(run_dir);
  if (!run) return run.error().with_context("run report for " + run_dir);
  auto written = write_file(out, run_report_html(*run));
  if (!written) return written.error().with_context("run report for " + run_dir);
  return ok_status();
}

}  // namespace sal::report
