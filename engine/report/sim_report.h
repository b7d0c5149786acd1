// sim_report.h — the simulator's HTML report: one self-contained page (inline SVG, no scripts, no
// external assets) written from a simulation result as sim::result_json produces it (see
// /tmp/sim/FORMAT.md: name, source, trials, seed, events, wall_s, metric, normalise_to, and points
// of strategies with their statistics, goodput, live nodes and recovery probabilities). It takes the
// JSON rather than sim types so that engine/report does not depend on engine/sim; fields missing
// from older or partial results show as "–".
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "core/result.h"

namespace sal::report {

// The page: a title with the scenario's name, source, trials, seed, events and wall time; per sweep
// point a table of strategies (mean ± standard error over trials) with goodput and live nodes over
// time, and predicted vs observed recovery probability when recorded; and, for a sweep along one
// parameter, the table metric against that parameter.
std::string sim_report_html(const nlohmann::json& result);

// Writes sim_report_html(result) to `path`. An error when `result` is not a JSON object or the file
// cannot be written (the message names the path).
Status write_sim_report(const nlohmann::json& result, const std::string& path);

}  // namespace sal::report
