// run_report.h — the page for one run: title, summary and expectations, throughput with workers and
// event marks, loss, time per phase, expert loads and placement of the last plan, and the tables of
// plans, recoveries and events. write_run_report (report.h) reads the run and writes this page.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "report/run_files.h"
#include "report/svg.h"

namespace sal::report {

std::string run_report_html(const Run& run);

// How an event is drawn on a time axis (failures red, recovered green, restore_begun orange, drill
// actions purple ticks, job_failed black); nullopt for kinds not drawn.
std::optional<Mark> event_mark(const EventRow& e);

// The legend entries for the mark and band kinds that occur in `marks` and `bands`.
std::vector<LegendItem> mark_legend(const std::vector<Mark>& marks, const std::vector<Band>& bands);

// Timeline intervals shown as bands (reconfigure light yellow, restore light orange).
std::vector<Band> timeline_bands(const std::vector<Interval>& timeline);

// A directory's last path component ("runs/a/" -> "a").
std::string base_name(const std::string& dir);

}  // namespace sal::report
