// sim_fields.h — tolerant readers of the simulator's result JSON (what sim::result_json writes; see
// sim_report.h). Every reader returns nothing, or an empty list, for a field that is missing or has
// the wrong type, so a page built from an older or partial result shows "–" instead of failing.
// Also the per-strategy helpers the page and its plots share: display labels and colors.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace sal::report {

std::optional<double> field_number(const nlohmann::json& j, const std::string& key);
std::optional<std::string> field_text(const nlohmann::json& j, const std::string& key);

// A statistic over trials: {"mean": m, "se": s}, or a bare number (then se is absent).
struct StatField {
  std::optional<double> mean, se;
};
StatField field_stat(const nlohmann::json& j, const std::string& key);

// The array `key` as numbers; entries that are not numbers become NaN (a gap in a plotted line).
std::vector<double> field_numbers(const nlohmann::json& j, const std::string& key);
// The objects in the array `key`; other entries are skipped.
std::vector<nlohmann::json> field_objects(const nlohmann::json& j, const std::string& key);

// A sweep value as text: strings bare, anything else as compact JSON ("0.05", "true").
std::string value_text(const nlohmann::json& v);

// A strategy's label; its kind, or "strategy N" (1-based `index`), when it has none.
std::string strategy_label(const nlohmann::json& strategy, size_t index);

// The scenario's table metric: "metric", or jct_s when the result has none.
std::string table_metric(const nlohmann::json& result);
// The strategy labelled `label` among `point`'s strategies (labels as strategy_label gives them).
std::optional<nlohmann::json> strategy_at(const nlohmann::json& point, const std::string& label);
// The table metric's mean for strategy `label` at `point`, divided by that of the strategy named by
// the result's "normalise_to" when one is set; nothing when either is missing or the divisor is 0.
std::optional<double> table_value(const nlohmann::json& result, const nlohmann::json& point, const std::string& label);

// One color per distinct strategy label across all points, in order of first appearance, so a
// strategy keeps its color in every table and plot of the page.
class StrategyColors {
 public:
  explicit StrategyColors(const nlohmann::json& result);
  std::string of(const std::string& label) const;

 private:
  std::map<std::string, size_t> index_;
};

}  // namespace sal::report
