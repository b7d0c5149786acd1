// run_report.cpp — see run_report.h. Each section is built by one function from the Run; sections
// whose file was missing (or held nothing) are left out.
#include "report/run_report.h"

#include <algorithm>
#include <map>

#include "core/paths.h"
#include "core/strings.h"
#include "report/events_table.h"
#include "report/html.h"
#include "report/report.h"
#include "report/run_charts.h"
#include "report/run_marks.h"
#include "report/svg.h"

namespace sal::report {
namespace {

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

std::string took(std::optional<double> s) { return s ? duration_text(*s) : kMissing; }

std::string summary_section(const Run& run) {
  std::string count =
      run.summary.contains("recoveries") ? std::to_string(summary_objects(run, "recoveries").size()) : kMissing;
  std::vector<std::vector<std::string>> rows = {
      {"steps", num(run.number("steps"))},
      {"samples", num(run.number("samples"))},
      {"lost steps", num(run.number("lost_steps"))},
      {"restores", num(run.number("restores"))},
      {"recoveries",
       count + " (p50 " + took(run.number("recovery_p50_s")) + ", max " + took(run.number("recovery_max_s")) + ")" +
           (run.number("capacity_wait_s").value_or(0) > 0 ? "; " + took(run.number("capacity_wait_s")) + " more waiting for capacity" : "")},
      {"elapsed", seconds(run.number("elapsed_s"))},
      {"tokens/s", num(run.number("tokens_per_s"), 1)},
      {"loss first → last", loss_text(run)},
      {"exit code", num(run.number("exit_code"))},
  };
  if (auto ended = run.text("stopped_by")) rows.push_back({"ended", escape(*ended)});
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

// ---- phases ----

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
  auto names = node_names(run.events);
  std::string body;
  for (size_t l = 0; l < p.placement.size(); ++l) {
    Grid g;
    for (size_t r = 0; r < p.placement[l].size(); ++r) {
      std::string worker = r < p.workers.size() ? worker_label(p.workers[r], names) : "rank " + std::to_string(r);
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
                     ": one row per worker (its node's name, then node.worker), one cell per expert slot holding "
                     "that expert's id (same color = same expert).");
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
  for (const auto& r : run_recoveries(run))
    rows.push_back({std::to_string(rows.size() + 1), num(r.at_s, 3), escape(r.cause),
                    r.kind.empty() ? kMissing : escape(r.kind), std::to_string(r.step), duration_text(r.seconds),
                    r.capacity_s > 0 ? duration_text(r.capacity_s) : ""});
  if (rows.empty()) return "";
  return section("Recoveries",
                 table({"#", "at (s)", "cause", "kind", "resumed with step", "time to recover", "waiting for capacity"}, rows),
                 "From the loss seen (a failed step, a lost worker) to the first step committed after it: the engine's "
                 "time; the time no plan could be made because too few workers were left is given apart.");
}

}  // namespace

std::map<std::string, std::string> node_names(const std::vector<EventRow>& events) {
  static const std::string kFrom = " from ";
  std::map<std::string, std::string> names;
  for (const auto& e : events) {
    size_t at = e.detail.find(kFrom);
    if (e.kind == "node_joined" && !e.node.empty() && at != std::string::npos && at > 0)
      names[e.node] = e.detail.substr(0, at);
  }
  return names;
}

std::string worker_label(const std::string& worker, const std::map<std::string, std::string>& names) {
  auto it = names.find(worker.substr(0, worker.find('.')));
  return it == names.end() ? worker : it->second + " · " + worker;
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
         expectations_section(run) + throughput_section(run) + training_section(run) + phases_section(run) +
         loads_section(run) + placement_section(run) + plans_section(run) + recoveries_section(run) +
         events_section(run.events) + page_end();
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
