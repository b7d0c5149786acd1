// sim_fields.cpp — see sim_fields.h.
#include "report/sim_fields.h"

#include <cmath>

#include "report/svg.h"

namespace sal::report {

namespace {

// The value at `key`, or null when `j` is not an object or lacks it.
const nlohmann::json* member(const nlohmann::json& j, const std::string& key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::optional<double> as_number(const nlohmann::json* v) {
  if (!v || !v->is_number()) return std::nullopt;
  double d = v->get<double>();
  if (!std::isfinite(d)) return std::nullopt;
  return d;
}

}  // namespace

std::optional<double> field_number(const nlohmann::json& j, const std::string& key) { return as_number(member(j, key)); }

std::optional<std::string> field_text(const nlohmann::json& j, const std::string& key) {
  const nlohmann::json* v = member(j, key);
  if (!v || !v->is_string()) return std::nullopt;
  return v->get<std::string>();
}

StatField field_stat(const nlohmann::json& j, const std::string& key) {
  const nlohmann::json* v = member(j, key);
  if (v && v->is_object()) return {field_number(*v, "mean"), field_number(*v, "se")};
  return {as_number(v), std::nullopt};
}

std::vector<double> field_numbers(const nlohmann::json& j, const std::string& key) {
  std::vector<double> out;
  const nlohmann::json* v = member(j, key);
  if (!v || !v->is_array()) return out;
  for (const auto& item : *v) out.push_back(as_number(&item).value_or(NAN));
  return out;
}

std::vector<nlohmann::json> field_objects(const nlohmann::json& j, const std::string& key) {
  std::vector<nlohmann::json> out;
  const nlohmann::json* v = member(j, key);
  if (!v || !v->is_array()) return out;
  for (const auto& item : *v)
    if (item.is_object()) out.push_back(item);
  return out;
}

std::string value_text(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

std::string strategy_label(const nlohmann::json& strategy, size_t index) {
  if (auto label = field_text(strategy, "label"); label && !label->empty()) return *label;
  if (auto kind = field_text(strategy, "kind"); kind && !kind->empty()) return *kind;
  return "strategy " + std::to_string(index + 1);
}

std::string table_metric(const nlohmann::json& result) {
  auto metric = field_text(result, "metric");
  return metric && !metric->empty() ? *metric : "jct_s";
}

std::optional<nlohmann::json> strategy_at(const nlohmann::json& point, const std::string& label) {
  auto strategies = field_objects(point, "strategies");
  for (size_t i = 0; i < strategies.size(); ++i)
    if (strategy_label(strategies[i], i) == label) return strategies[i];
  return std::nullopt;
}

std::optional<double> table_value(const nlohmann::json& result, const nlohmann::json& point, const std::string& label) {
  auto s = strategy_at(point, label);
  if (!s) return std::nullopt;
  std::string metric = table_metric(result);
  auto value = field_stat(*s, metric).mean;
  auto base_label = field_text(result, "normalise_to");
  if (!value || !base_label || base_label->empty()) return value;
  auto base = strategy_at(point, *base_label);
  auto divisor = base ? field_stat(*base, metric).mean : std::nullopt;
  if (!divisor || *divisor == 0) return std::nullopt;
  return *value / *divisor;
}

StrategyColors::StrategyColors(const nlohmann::json& result) {
  for (const auto& point : field_objects(result, "points")) {
    auto strategies = field_objects(point, "strategies");
    for (size_t i = 0; i < strategies.size(); ++i) index_.emplace(strategy_label(strategies[i], i), index_.size());
  }
}

std::string StrategyColors::of(const std::string& label) const {
  auto it = index_.find(label);
  return palette(it == index_.end() ? index_.size() : it->second);
}

}  // namespace sal::report
