// run_marks.cpp — see run_marks.h.
#include "report/run_marks.h"

#include <algorithm>
#include <cmath>

#include "core/strings.h"
#include "report/html.h"

namespace sal::report {
namespace {

struct MarkStyle {
  const char* kind;
  const char* label;
  const char* color;
  Swatch swatch;
};

const MarkStyle kFailure{"failure", "failure", "#d32f2f", Swatch::Dashed};
const MarkStyle kStop{"stop", "stop (completed, job.stop(), Ctrl-C)", "#37474f", Swatch::Line};
const MarkStyle kRestore{"restore", "restore begun", "#ef6c00", Swatch::Dashed};
const MarkStyle kDrill{"drill", "drill action", "#7b1fa2", Swatch::Tick};
const MarkStyle kPolicy{"policy", "policy swap", "#1565c0", Swatch::Tick};
const MarkStyle kJobFailed{"job-failed", "job failed", "#000000", Swatch::Line};
const MarkStyle kSaved{"saved", "snapshot or checkpoint written", "#00897b", Swatch::Tick};
const MarkStyle kSaveTrouble{"save-trouble", "snapshot dropped, failed or slow; checkpoint failed", "#f9a825",
                             Swatch::Dashed};
const MarkStyle kSlow{"slow", "worker named slow (gray failure)", "#6d4c41", Swatch::Dashed};
const MarkStyle kSpeedBack{"speed-back", "slow worker's speed back", "#8d6e63", Swatch::Tick};
const MarkStyle* const kMarkStyles[] = {&kFailure, &kStop,        &kRestore, &kDrill,    &kPolicy,
                                        &kJobFailed, &kSaved, &kSaveTrouble, &kSlow, &kSpeedBack};

struct AreaStyle {
  const char* kind;
  const char* label;
  const char* color;
};
const AreaStyle kBandStyles[] = {{"reconfigure", "reconfiguration", "#fff0a0"}, {"restore", "restore", "#ffd5a8"}};
const AreaStyle kSpanStyles[] = {{"recovery", "recovery (its duration above the plot)", "#43a047"},
                                 {"recovery-restore", "recovery by a restore", "#ef6c00"}};

const MarkStyle* style_of(const EventRow& e) {
  if (is_stop(e)) return &kStop;
  if (is_failure(e)) return &kFailure;
  if (e.kind == "restore_begun") return &kRestore;
  if (e.kind == "drill" || e.kind == "drill_error") return &kDrill;
  if (e.kind == "policy_loaded" || e.kind == "policy_rollback") return &kPolicy;
  if (e.kind == "job_failed") return &kJobFailed;
  if (e.kind == "node_slow") return &kSlow;
  if (e.kind == "node_speed_back") return &kSpeedBack;
  if (e.kind == "snapshot_saved" || e.kind == "checkpoint_saved") return &kSaved;
  if (e.kind == "snapshot_dropped" || e.kind == "snapshot_failed" || e.kind == "snapshot_slow" ||
      e.kind == "checkpoint_failed")
    return &kSaveTrouble;
  return nullptr;
}

// "completed" after every step, "stopped" otherwise (job.stop(), Ctrl-C, a drill's end).
std::string stop_label(const EventRow& e) {
  if (e.kind == "steps_done" || e.detail.rfind("completed", 0) == 0) return "completed";
  return "stopped";
}

// "training resumed: step 20 committed 324 ms after step 20 aborted: ..." -> a recovery ending at
// the event (its kind is settled by the caller).
std::optional<Recovery> from_recovered_event(const EventRow& e) {
  static const std::string kStep = "step ", kCommitted = " committed ", kAfter = " ms after ";
  size_t s = e.detail.find(kStep), c = e.detail.find(kCommitted), a = e.detail.find(kAfter);
  if (s == std::string::npos || c == std::string::npos || a == std::string::npos || !(s < c && c < a))
    return std::nullopt;
  auto step = parse_uint(e.detail.substr(s + kStep.size(), c - s - kStep.size()));
  auto ms = parse_double(e.detail.substr(c + kCommitted.size(), a - c - kCommitted.size()));
  if (!step || !ms) return std::nullopt;
  return Recovery{e.time_s - *ms / 1e3, *ms / 1e3, 0, *step, e.detail.substr(a + kAfter.size()), "elastic"};
}

std::vector<Recovery> recoveries_from_events(const std::vector<EventRow>& events) {
  std::vector<Recovery> out;
  for (const auto& e : events) {
    if (e.kind != "recovered") continue;
    auto r = from_recovered_event(e);
    if (!r) continue;
    bool restored = std::any_of(events.begin(), events.end(), [&](const EventRow& x) {
      return x.kind == "restore_begun" && x.time_s >= r->at_s && x.time_s <= e.time_s;
    });
    if (restored) r->kind = "restore";
    out.push_back(*r);
  }
  return out;
}

Recovery from_summary(const nlohmann::json& j) {
  Recovery r;
  auto number = [&](const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
  };
  r.at_s = number("at_s");
  r.seconds = number("seconds");
  r.capacity_s = number("capacity_wait_s");
  r.step = uint64_t(std::max(number("step"), 0.0));
  if (auto it = j.find("cause"); it != j.end() && it->is_string()) r.cause = it->get<std::string>();
  if (auto it = j.find("kind"); it != j.end() && it->is_string()) r.kind = it->get<std::string>();
  return r;
}

double on_axis(const Run& run, Axis axis, double t) { return axis == Axis::time ? t : step_at(run.metrics, t); }

}  // namespace

std::vector<Recovery> run_recoveries(const Run& run) {
  auto list = run.summary.find("recoveries");
  if (list == run.summary.end() || !list->is_array()) return recoveries_from_events(run.events);
  std::vector<Recovery> out;
  for (const auto& item : *list)
    if (item.is_object()) out.push_back(from_summary(item));
  return out;
}

double step_at(const std::vector<StepRow>& m, double t) {
  if (m.empty()) return 0;
  if (t < m.front().time_s) return double(m.front().step);
  size_t i = size_t(std::upper_bound(m.begin(), m.end(), t, [](double v, const StepRow& r) { return v < r.time_s; }) -
                    m.begin()) -
             1;
  const StepRow& r = m[i];
  double span = 0;
  if (i + 1 < m.size() && m[i + 1].step == r.step + 1) {
    span = m[i + 1].time_s - r.time_s;
  } else if (i + 1 == m.size() && i > 0) {
    span = r.time_s - m[i - 1].time_s;  // after the last commit: as long as the step before took
  }
  double fraction = span > 0 ? std::clamp((t - r.time_s) / span, 0.0, 1.0) : 0.5;
  return double(r.step) + fraction;
}

std::optional<Mark> event_mark(const EventRow& e) {
  const MarkStyle* style = style_of(e);
  if (!style) return std::nullopt;
  std::string where = e.node.empty() ? "" : " node " + e.node;
  Mark m{e.time_s,
         style->kind,
         style->color,
         num(e.time_s, 2) + " s  " + e.kind + where + ": " + e.detail,
         style->swatch == Swatch::Dashed,
         style->swatch == Swatch::Tick,
         style == &kStop ? stop_label(e) : ""};
  return m;
}

std::vector<Mark> event_marks(const Run& run, Axis axis) {
  std::vector<Mark> marks;
  bool stopped = false;
  for (const auto& e : run.events) {
    auto m = event_mark(e);
    if (!m) continue;
    if (m->kind == kStop.kind) {
      if (stopped) continue;
      stopped = true;
    }
    m->x = on_axis(run, axis, e.time_s);
    marks.push_back(std::move(*m));
  }
  return marks;
}

std::string duration_text(double seconds) {
  if (!std::isfinite(seconds)) return kMissing;
  if (std::fabs(seconds) < 1) return num(seconds * 1e3, 0) + " ms";
  return num(seconds, std::fabs(seconds) < 10 ? 2 : 1) + " s";
}

std::vector<Span> recovery_spans(const Run& run, Axis axis) {
  std::vector<Span> spans;
  auto recoveries = run_recoveries(run);
  for (size_t i = 0; i < recoveries.size(); ++i) {
    const Recovery& r = recoveries[i];
    bool restore = r.kind == "restore";
    const AreaStyle& style = kSpanStyles[restore ? 1 : 0];
    double x0 = on_axis(run, axis, r.at_s), x1 = on_axis(run, axis, r.at_s + r.seconds + r.capacity_s);
    std::string took = duration_text(r.seconds) + (r.capacity_s > 0 ? " + " + duration_text(r.capacity_s) + " waiting for capacity" : "");
    spans.push_back({std::min(x0, x1), std::max(x0, x1), style.kind, style.color, (restore ? "restore " : "") + took,
                     "recovery " + std::to_string(i + 1) + " (" + (r.kind.empty() ? "?" : r.kind) + "): " + took +
                         " from " + num(r.at_s, 3) + " s to step " + std::to_string(r.step) + " committed, after " +
                         r.cause});
  }
  return spans;
}

std::vector<Band> timeline_bands(const std::vector<Interval>& timeline) {
  std::vector<Band> bands;
  for (const auto& iv : timeline)
    for (const AreaStyle& s : kBandStyles)
      if (iv.phase == s.kind)
        bands.push_back({iv.start_s, iv.end_s, s.kind, s.color,
                         iv.phase + " " + num(iv.start_s, 2) + "–" + num(iv.end_s, 2) + " s" +
                             (iv.detail.empty() ? "" : ": " + iv.detail)});
  return bands;
}

std::vector<LegendItem> mark_legend(const std::vector<Mark>& marks, const std::vector<Band>& bands,
                                    const std::vector<Span>& spans) {
  std::vector<LegendItem> items;
  for (const MarkStyle* s : kMarkStyles)
    if (std::any_of(marks.begin(), marks.end(), [&](const Mark& m) { return m.kind == s->kind; }))
      items.push_back({s->label, s->color, s->swatch});
  for (const AreaStyle& s : kSpanStyles)
    if (std::any_of(spans.begin(), spans.end(), [&](const Span& x) { return x.kind == s.kind; }))
      items.push_back({s.label, s.color, Swatch::Box});
  for (const AreaStyle& s : kBandStyles)
    if (std::any_of(bands.begin(), bands.end(), [&](const Band& b) { return b.kind == s.kind; }))
      items.push_back({s.label, s.color, Swatch::Box});
  return items;
}

}  // namespace sal::report
