// sim_charts.h — the plots of the simulator report (sim_report.h), each one <svg> built with
// svg.h, or "" when the result holds nothing to draw: goodput and live nodes over time for the
// strategies of one sweep point, predicted vs observed recovery probability by failures absorbed,
// and the table metric against a swept parameter.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "report/sim_fields.h"

namespace sal::report {

// The unit of a time axis: seconds, or hours when the data span two hours or more.
struct TimeUnit {
  double seconds = 1;
  std::string label;  // the axis label
};
TimeUnit time_unit(double span_s);

// Samples/s per bucket ("goodput", drawn at bucket middles), one line per strategy.
std::string goodput_chart(const std::vector<nlohmann::json>& strategies, const StrategyColors& colors);
// Mean nodes up per bucket ("live_nodes", drawn as steps), one line per strategy.
std::string live_nodes_chart(const std::vector<nlohmann::json>& strategies, const StrategyColors& colors);
// P(survive) by k from each strategy's "recovery": predicted as a line, observed as points.
std::string recovery_chart(const std::vector<nlohmann::json>& strategies, const StrategyColors& colors);
// table_value (sim_fields.h) at each point against the point's value of `axis`, one line per
// strategy; points are numbered 1, 2, … along x when the values are not all numbers.
std::string sweep_chart(const nlohmann::json& result, const std::string& axis, const StrategyColors& colors);

}  // namespace sal::report
