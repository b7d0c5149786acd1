// report.h — the run report: a self-contained HTML page (inline SVG plots, one small inline script
// that pages the events table, no external assets) written from the files the controller leaves in
// a run directory (metrics.csv, events.csv, timeline.csv, plans.jsonl, summary.json), and a page
// putting several runs of one job side by side.
#pragma once

#include <string>
#include <vector>

#include "core/result.h"

namespace sal::report {

// Reads RUN_DIR's files and writes the report to `out_html` (RUN_DIR/report.html when empty).
// Missing optional files just omit their section; a missing metrics.csv, or a malformed line in
// any file, is an error naming the file, line and column.
Status write_run_report(const std::string& run_dir, const std::string& out_html = "");

// Several runs of the same job (e.g. one drill under three recovery modes, each maybe several times)
// side by side: writes `out_html`, and beside it (its name with .json for .html) the per-mode
// medians and ranges (mode_stats.h); `mode_table`, when given, gets them as a text table. Each run
// dir needs metrics.csv; summary.json fields that are missing show as "–".
Status write_comparison(const std::vector<std::string>& run_dirs, const std::string& out_html,
                        std::string* mode_table = nullptr);

}  // namespace sal::report
