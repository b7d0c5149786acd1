// run_report.h — the page for one run: title, summary and expectations, throughput with workers
// against time, the training curves against step (run_charts.h; events and recoveries drawn by
// run_marks.h), time per phase, expert loads and placement of the last plan (rows named by node),
// and the tables of plans, recoveries and events (events_table.h, paged in the page).
// write_run_report (report.h) reads the run and writes this page.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "report/run_files.h"

namespace sal::report {

std::string run_report_html(const Run& run);

// Node id -> the name it joined with (node_joined: "NAME from ADDR with N device(s)"); a node that
// joined again keeps its last name.
std::map<std::string, std::string> node_names(const std::vector<EventRow>& events);

// A placement row's label: "node3 · 3.0" for worker "3.0" of a node named node3, else the id alone.
std::string worker_label(const std::string& worker, const std::map<std::string, std::string>& names);

// A directory's last path component ("runs/a/" -> "a").
std::string base_name(const std::string& dir);

}  // namespace sal::report
