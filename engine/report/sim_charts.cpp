// sim_charts.cpp — see sim_charts.h.
#include "report/sim_charts.h"

#include <algorithm>
#include <cmath>

#include "report/svg.h"

namespace sal::report {
namespace {

constexpr double kHour = 3600;

bool has_data(const LineChart& c) {
  return std::any_of(c.series.begin(), c.series.end(), [](const Series& s) {
    return std::any_of(s.y.begin(), s.y.end(), [](double v) { return std::isfinite(v); });
  });
}

std::string draw_if_any(const LineChart& c) { return has_data(c) ? line_chart(c) : ""; }

// ---- over time ----

// Width of one bucket of a strategy's time series; 0 when the result does not say.
double bucket_of(const nlohmann::json& strategy) {
  double b = field_number(strategy, "bucket_s").value_or(0);
  return b > 0 ? b : 0;
}

// The x axis for the strategies' `key` series: time when any strategy gives its bucket width,
// else bucket numbers.
TimeUnit axis_for(const std::vector<nlohmann::json>& strategies, const std::string& key) {
  double span = 0;
  for (const auto& s : strategies) span = std::max(span, bucket_of(s) * double(field_numbers(s, key).size()));
  return span > 0 ? time_unit(span) : TimeUnit{0, "bucket"};
}

// The strategy's `key` series against time: x at each bucket's middle (Line) or start (Steps, with
// one more point closing the last bucket); bucket numbers when `unit.seconds` is 0.
Series bucket_series(const nlohmann::json& s, const std::string& key, const TimeUnit& unit, Draw draw) {
  Series out;
  out.draw = draw;
  out.y = field_numbers(s, key);
  double width = unit.seconds > 0 ? bucket_of(s) / unit.seconds : 1;
  if (unit.seconds > 0 && width <= 0) out.y.clear();  // no bucket width: cannot be placed in time
  double offset = draw == Draw::Steps ? 0 : 0.5;
  for (size_t i = 0; i < out.y.size(); ++i) out.x.push_back((double(i) + offset) * width);
  if (draw == Draw::Steps && !out.y.empty()) {
    out.x.push_back(double(out.y.size()) * width);
    out.y.push_back(out.y.back());
  }
  return out;
}

LineChart over_time(const std::vector<nlohmann::json>& strategies, const StrategyColors& colors,
                    const std::string& key, Draw draw) {
  LineChart c;
  TimeUnit unit = axis_for(strategies, key);
  c.x_label = unit.label;
  c.height = 260;
  for (size_t i = 0; i < strategies.size(); ++i) {
    Series s = bucket_series(strategies[i], key, unit, draw);
    s.name = strategy_label(strategies[i], i);
    s.color = colors.of(s.name);
    c.series.push_back(std::move(s));
  }
  return c;
}

// ---- recovery ----

void add_recovery(LineChart& c, const std::string& label, const std::string& color,
                  const std::vector<nlohmann::json>& ks) {
  Series predicted{label + " predicted", color, Draw::Line, false, {}, {}};
  Series observed{label + " observed", color, Draw::Points, false, {}, {}};
  for (const auto& r : ks) {
    auto k = field_number(r, "k");
    if (!k) continue;
    predicted.x.push_back(*k);
    predicted.y.push_back(field_number(r, "predicted").value_or(NAN));
    observed.x.push_back(*k);
    observed.y.push_back(field_number(r, "observed").value_or(NAN));
  }
  c.series.push_back(std::move(predicted));
  c.series.push_back(std::move(observed));
}

// ---- sweep ----

// Each point's value of `axis` as x: the number itself when all are numbers, else 1, 2, ….
std::vector<double> sweep_xs(const std::vector<nlohmann::json>& points, const std::string& axis, bool& numeric) {
  std::vector<double> xs;
  numeric = true;
  for (const auto& p : points) {
    auto params = p.find("params");
    auto v = params != p.end() && params->is_object() ? field_number(*params, axis) : std::nullopt;
    if (!v) numeric = false;
    xs.push_back(v.value_or(NAN));
  }
  if (!numeric)
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = double(i + 1);
  return xs;
}

// Strategy labels over all points, in order of first appearance.
std::vector<std::string> all_labels(const std::vector<nlohmann::json>& points) {
  std::vector<std::string> labels;
  for (const auto& p : points) {
    auto strategies = field_objects(p, "strategies");
    for (size_t i = 0; i < strategies.size(); ++i) {
      std::string l = strategy_label(strategies[i], i);
      if (std::find(labels.begin(), labels.end(), l) == labels.end()) labels.push_back(l);
    }
  }
  return labels;
}

std::string metric_axis_label(const nlohmann::json& result) {
  std::string label = table_metric(result);
  auto base = field_text(result, "normalise_to");
  return base && !base->empty() ? label + " ÷ " + *base : label;
}

}  // namespace

TimeUnit time_unit(double span_s) {
  if (span_s >= 2 * kHour) return {kHour, "time (h)"};
  return {1, "time (s)"};
}

std::string goodput_chart(const std::vector<nlohmann::json>& strategies, const StrategyColors& colors) {
  LineChart c = over_time(strategies, colors, "goodput", Draw::Line);
  c.y_label = "samples/s";
  return draw_if_any(c);
}

std::string live_nodes_chart(const std::vector<nlohmann::json>& strategies, const StrategyColors& colors) {
  LineChart c = over_time(strategies, colors, "live_nodes", Draw::Steps);
  c.y_label = "live nodes";
  c.height = 200;
  return draw_if_any(c);
}

std::string recovery_chart(const std::vector<nlohmann::json>& strategies, const StrategyColors& colors) {
  LineChart c;
  c.x_label = "failures absorbed since the plan (k)";
  c.y_label = "P(survive)";
  c.x_integer = true;
  c.x_from_zero = false;
  c.width = 640;
  c.height = 240;
  for (size_t i = 0; i < strategies.size(); ++i) {
    auto ks = field_objects(strategies[i], "recovery");
    if (ks.empty()) continue;
    std::string label = strategy_label(strategies[i], i);
    add_recovery(c, label, colors.of(label), ks);
  }
  return draw_if_any(c);
}

std::string sweep_chart(const nlohmann::json& result, const std::string& axis, const StrategyColors& colors) {
  auto points = field_objects(result, "points");
  bool numeric = true;
  std::vector<double> xs = sweep_xs(points, axis, numeric);
  LineChart c;
  c.x_label = numeric ? axis : "sweep point (" + axis + ")";
  c.y_label = metric_axis_label(result);
  c.x_from_zero = false;
  c.x_integer = !numeric;
  for (const auto& label : all_labels(points)) {
    Series line{label, colors.of(label), Draw::Line, false, xs, {}};
    for (const auto& p : points) line.y.push_back(table_value(result, p, label).value_or(NAN));
    Series dots{"", line.color, Draw::Points, false, xs, line.y};
    c.series.push_back(std::move(line));
    c.series.push_back(std::move(dots));
  }
  return draw_if_any(c);
}

}  // namespace sal::report
