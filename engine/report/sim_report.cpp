// sim_report.cpp — see sim_report.h. The page is a title block, one section per sweep point (table
// of strategies, plots over time, recovery probability) and the sweep plot; each built by one
// function from the JSON, with readers from sim_fields.h and plots from sim_charts.h.
#include "report/sim_report.h"

#include <set>

#include "core/paths.h"
#include "report/html.h"
#include "report/sim_charts.h"
#include "report/sim_fields.h"

namespace sal::report {
namespace {

using nlohmann::json;

// ---- title ----

std::string title_block(const json& result) {
  std::string name = field_text(result, "name").value_or("simulation");
  std::string out = "<h1>Simulation: " + escape(name) + "</h1>\n";
  auto source = field_text(result, "source");
  out += "<p class=\"sub\">source <b>" + (source ? escape(*source) : kMissing) + "</b> · trials <b>" +
         num(field_number(result, "trials")) + "</b> · seed <b>" + num(field_number(result, "seed")) +
         "</b> · events <b>" + num(field_number(result, "events")) + "</b> · wall time <b>" +
         seconds(field_number(result, "wall_s")) + "</b></p>\n";
  return out;
}

// ---- strategy table ----

struct StatColumn {
  const char* key;
  const char* head;
  int decimals;
};

const StatColumn kStatColumns[] = {
    {"jct_s", "JCT (s)", 1},           {"samples", "samples", 0},       {"steps", "steps", 1},
    {"lost_steps", "lost steps", 1},   {"ettr", "ETTR", 3},             {"availability", "availability", 3},
    {"failures", "failures", 1},       {"masked", "masked", 1},         {"reconfigurations", "reconfigurations", 1},
    {"restores", "restores", 1},
};

std::string stat_cell(const StatField& s, int decimals) {
  if (!s.mean) return kMissing;
  if (!s.se) return num(s.mean, decimals);
  return num(s.mean, decimals) + " ± " + num(s.se, decimals);
}

std::string label_cell(const json& strategy, const std::string& label, const StrategyColors& colors) {
  std::string kind = field_text(strategy, "kind").value_or(kMissing);
  std::string checkpoint = field_text(strategy, "checkpoint").value_or("");
  return "<span style=\"color:" + colors.of(label) + "\">■</span> " + escape(label) + "<br><span class=\"caption\">" +
         escape(kind) + (checkpoint.empty() ? "" : " · " + escape(checkpoint)) + "</span>";
}

std::string finished_cell(const json& strategy) {
  return num(field_number(strategy, "finished")) + "/" + num(field_number(strategy, "trials"));
}

std::vector<std::string> strategy_row(const json& result, const json& point, const json& strategy,
                                      const std::string& label, const StrategyColors& colors, bool normalised) {
  std::vector<std::string> row = {label_cell(strategy, label, colors), finished_cell(strategy)};
  for (const auto& c : kStatColumns) row.push_back(stat_cell(field_stat(strategy, c.key), c.decimals));
  row.push_back(num(field_stat(strategy, "plan_ms").mean, 2));
  if (normalised) row.push_back(num(table_value(result, point, label), 3));
  return row;
}

std::string strategy_table(const json& result, const json& point, const StrategyColors& colors) {
  auto strategies = field_objects(point, "strategies");
  auto base = field_text(result, "normalise_to");
  bool normalised = base && !base->empty();
  std::vector<std::string> head = {"strategy", "finished"};
  for (const auto& c : kStatColumns) head.push_back(c.head);
  head.push_back("plan (ms)");
  if (normalised) head.push_back(escape(table_metric(result)) + " ÷ " + escape(*base));
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < strategies.size(); ++i)
    rows.push_back(strategy_row(result, point, strategies[i], strategy_label(strategies[i], i), colors, normalised));
  return table(head, rows);
}

// ---- recovery ----

bool any_recovery(const std::vector<json>& strategies) {
  for (const auto& s : strategies)
    if (!field_objects(s, "recovery").empty()) return true;
  return false;
}

std::string recovery_table(const std::vector<json>& strategies, const StrategyColors& colors) {
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < strategies.size(); ++i) {
    std::string label = strategy_label(strategies[i], i);
    for (const auto& r : field_objects(strategies[i], "recovery"))
      rows.push_back({"<span style=\"color:" + colors.of(label) + "\">■</span> " + escape(label),
                      num(field_number(r, "k")), num(field_number(r, "failures")), num(field_number(r, "predicted"), 3),
                      num(field_number(r, "observed"), 3)});
  }
  return table({"strategy", "k", "failures", "predicted P(survive)", "observed P(survive)"}, rows);
}

std::string recovery_block(const std::vector<json>& strategies, const StrategyColors& colors) {
  if (!any_recovery(strategies)) return "";
  return "<h3>Recovery probability</h3>\n<p class=\"caption\">For the failures that were the k-th since a plan: "
         "the exact probability that the placement survives them, computed before they happened (predicted, "
         "line), and the share that it did survive without a restore (observed, points).</p>\n" +
         recovery_table(strategies, colors) + recovery_chart(strategies, colors);
}

// ---- one sweep point ----

std::string params_text(const json& point) {
  auto params = point.find("params");
  if (params == point.end() || !params->is_object() || params->empty()) return "";
  std::string out;
  for (const auto& [key, value] : params->items()) out += (out.empty() ? "" : ", ") + key + " = " + value_text(value);
  return out;
}

std::string point_heading(const json& point, size_t index, size_t count) {
  std::string params = params_text(point);
  if (count == 1) return params.empty() ? "Results" : "Results: " + params;
  return "Point " + std::to_string(index + 1) + " of " + std::to_string(count) + (params.empty() ? "" : ": " + params);
}

std::string chart_block(const std::string& heading, const std::string& caption, const std::string& chart) {
  if (chart.empty()) return "";
  return "<h3>" + escape(heading) + "</h3>\n<p class=\"caption\">" + escape(caption) + "</p>\n" + chart;
}

std::string point_section(const json& result, const json& point, size_t index, size_t count,
                          const StrategyColors& colors) {
  auto strategies = field_objects(point, "strategies");
  std::string body = strategy_table(result, point, colors);
  body += chart_block("Goodput over time",
                      "Samples trained per second in each time bucket, averaged over trials.",
                      goodput_chart(strategies, colors));
  body += chart_block("Live nodes", "Nodes up in each time bucket, averaged over trials.",
                      live_nodes_chart(strategies, colors));
  body += recovery_block(strategies, colors);
  return section(point_heading(point, index, count), body,
                 "Mean ± standard error over trials; finished: trials that reached the stop condition. Plan: "
                 "mean milliseconds per planning call.");
}

// ---- sweep ----

// The one parameter every point sets, when there is exactly one.
std::optional<std::string> single_axis(const std::vector<json>& points) {
  std::set<std::string> keys;
  for (const auto& p : points) {
    auto params = p.find("params");
    if (params == p.end() || !params->is_object() || params->empty()) return std::nullopt;
    for (const auto& [key, value] : params->items()) keys.insert(key);
  }
  if (keys.size() != 1) return std::nullopt;
  return *keys.begin();
}

std::string sweep_section(const json& result, const std::vector<json>& points, const StrategyColors& colors) {
  if (points.size() < 2) return "";
  auto axis = single_axis(points);
  if (!axis) return "";
  std::string chart = sweep_chart(result, *axis, colors);
  if (chart.empty()) return "";
  auto base = field_text(result, "normalise_to");
  std::string what = table_metric(result) + (base && !base->empty() ? " divided by " + *base + "'s" : "");
  return section("Sweep: " + table_metric(result) + " against " + *axis, chart,
                 "Each strategy's mean " + what + " at each sweep point.");
}

}  // namespace

std::string sim_report_html(const json& result) {
  std::string name = field_text(result, "name").value_or("simulation");
  std::string out = page_begin("Salamander simulation: " + name) + title_block(result);
  StrategyColors colors(result);
  auto points = field_objects(result, "points");
  if (points.empty()) out += "<p>The result holds no sweep points.</p>\n";
  for (size_t i = 0; i < points.size(); ++i) out += point_section(result, points[i], i, points.size(), colors);
  out += sweep_section(result, points, colors);
  return out + page_end();
}

Status write_sim_report(const json& result, const std::string& path) {
  if (path.empty()) return fail("simulation report: no output file given");
  if (!result.is_object())
    return fail("simulation report ", path, ": the result is not a JSON object (got ", result.type_name(), ")");
  auto written = write_file(path, sim_report_html(result));
  if (!written) return written.error().with_context("writing simulation report " + path);
  return ok_status();
}

}  // namespace sal::report
