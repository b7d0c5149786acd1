// run_marks.h — what the run report draws of a run's history over its plots, on a time axis (seconds
// since the controller started) or a step axis (committed steps): event marks (failures, the stop,
// drill actions, policy swaps, restores begun, a failed job), each recovery as a span labelled with
// its duration (readable however short it was), the driver's reconfiguration and restore phases as
// bands, and the legend for all of them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "report/run_files.h"
#include "report/svg.h"

namespace sal::report {

enum class Axis { time, step };

// One recovery: from the loss seen (at_s) to the first step committed after it (`step`).
struct Recovery {
  double at_s = 0, seconds = 0;  // seconds: the engine's time
  double capacity_s = 0;         // more, waiting for workers enough to plan
  uint64_t step = 0;
  std::string cause, kind;  // kind: elastic | restore
};

// summary.json's recoveries; when the summary has none (a run that never finished), those the
// `recovered` events tell ("... step 20 committed 324 ms after CAUSE"), a restore_begun between
// the loss and the recovery making it a restore.
std::vector<Recovery> run_recoveries(const Run& run);

// Where time `t` falls on a step axis: between the last step committed by t and the next one, in
// proportion to the time between their commits (after the last commit, to that step's own time);
// the first committed step for a time before it.
double step_at(const std::vector<StepRow>& metrics, double t);

// How one event is drawn on a time axis: failures red, restore_begun orange, drill actions purple
// ticks, policy swaps (policy_loaded, policy_rollback) blue ticks, job_failed black, a stop slate
// with a label ("completed", "stopped"); nullopt for kinds not drawn.
std::optional<Mark> event_mark(const EventRow& e);

// The marks of a run's events on `axis`: each as event_mark, the stop only once (its first event).
std::vector<Mark> event_marks(const Run& run, Axis axis);

// The run's recoveries on `axis`, labelled with their durations ("324 ms", "restore 2.4 s").
std::vector<Span> recovery_spans(const Run& run, Axis axis);

// Timeline intervals shown as bands (reconfigure light yellow, restore light orange).
std::vector<Band> timeline_bands(const std::vector<Interval>& timeline);

// The legend entries for the kinds of mark, band and span that occur.
std::vector<LegendItem> mark_legend(const std::vector<Mark>& marks, const std::vector<Band>& bands,
                                    const std::vector<Span>& spans = {});

// A duration for a label: "85 ms" below a second, "2.43 s", "12.4 s".
std::string duration_text(double seconds);

}  // namespace sal::report
