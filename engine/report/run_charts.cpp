// run_charts.cpp — see run_charts.h.
#include "report/run_charts.h"

#include <cmath>

#include "report/html.h"
#include "report/run_marks.h"

namespace sal::report {
namespace {

constexpr const char* kLossColor = "#1f77b4";
constexpr const char* kRedoneColor = "#e8590c";
constexpr const char* kValidationColor = "#2ca02c";
constexpr int kSmallChartHeight = 170;
constexpr int kTrainingLeft = 84;  // one left edge for the charts against step, so their steps line up

// The recoveries as light bands (the small charts under the loss: no labels, no strip).
std::vector<Band> recovery_bands(const Run& run) {
  std::vector<Band> bands;
  for (const auto& s : recovery_spans(run, Axis::step)) bands.push_back({s.x0, s.x1, s.kind, "#c8e6c9", s.title});
  return bands;
}

// A small chart of one metrics column against step, under the loss.
std::string small_chart(const Run& run, const std::string& title, const std::string& y_label, const char* color,
                        bool from_zero, const std::function<double(const StepRow&)>& value) {
  LineChart c;
  c.x_label = "step";
  c.y_label = y_label;
  c.x_integer = true;
  c.y_from_zero = from_zero;
  c.height = kSmallChartHeight;
  c.left = kTrainingLeft;
  StepCurve curve = step_curve(run.metrics, value);
  curve.line.name = "";
  curve.line.color = color;
  c.series = {curve.line};
  if (!curve.redone.x.empty()) c.series.push_back(curve.redone);
  c.bands = recovery_bands(run);
  return "<h3>" + escape(title) + "</h3>\n" + line_chart(c);
}

std::string loss_chart(const Run& run) {
  LineChart c;
  c.x_label = "step";
  c.y_label = "loss";
  c.x_integer = true;
  c.left = kTrainingLeft;
  c.y_from_zero = false;
  StepCurve curve = step_curve(run.metrics, [](const StepRow& r) { return r.loss; });
  curve.line.name = "loss";
  curve.line.color = kLossColor;
  c.series = {curve.line};
  if (!curve.redone.x.empty()) c.series.push_back(curve.redone);
  Series validation{"validation loss (held-out)", kValidationColor, Draw::Line, false, {}, {}};
  for (const auto& r : run.metrics)
    if (!std::isnan(r.val_loss)) validation.x.push_back(double(r.step)), validation.y.push_back(r.val_loss);
  if (!validation.x.empty()) c.series.push_back(validation);
  c.marks = event_marks(run, Axis::step);
  c.spans = recovery_spans(run, Axis::step);
  c.legend = mark_legend(c.marks, {}, c.spans);
  return line_chart(c);
}

}  // namespace

StepCurve step_curve(const std::vector<StepRow>& metrics, const std::function<double(const StepRow&)>& value) {
  StepCurve out;
  out.line.draw = Draw::Line;
  out.redone = {"re-executed step (after a restore)", kRedoneColor, Draw::Points, false, {}, {}};
  bool any = false;
  uint64_t highest = 0, previous = 0;
  for (const auto& r : metrics) {
    if (any && r.step < previous) {  // back to a restored step: lift the pen
      out.line.x.push_back(NAN);
      out.line.y.push_back(NAN);
    }
    out.line.x.push_back(double(r.step));
    out.line.y.push_back(value(r));
    if (any && r.step <= highest) {
      out.redone.x.push_back(double(r.step));
      out.redone.y.push_back(value(r));
    }
    highest = any ? std::max(highest, r.step) : r.step;
    previous = r.step;
    any = true;
  }
  return out;
}

std::string throughput_section(const Run& run) {
  if (run.metrics.empty()) return section("Throughput", "<p>No steps were committed.</p>\n");
  LineChart c;
  c.x_label = "time since start (s)";
  c.y_label = "tokens/s";
  c.y2_label = "live workers";
  Series tput{"tokens/s", kLossColor, Draw::Line, false, {}, {}};
  Series workers{"live workers", "#555555", Draw::Steps, true, {}, {}};
  for (const auto& r : run.metrics) {
    tput.x.push_back(r.time_s);
    tput.y.push_back(r.tokens_per_s);
    workers.x.push_back(r.time_s);
    workers.y.push_back(double(r.workers));
  }
  c.series = {tput, workers};
  c.marks = event_marks(run, Axis::time);
  c.spans = recovery_spans(run, Axis::time);
  c.bands = timeline_bands(run.timeline);
  c.legend = mark_legend(c.marks, c.bands, c.spans);
  return section("Throughput", line_chart(c),
                 "Tokens per second of each committed step against time, with the live workers (right axis). "
                 "Vertical lines mark events; the bars above the plot are recoveries, labelled with how long each "
                 "took; hover any of them for details.");
}

std::string training_section(const Run& run) {
  if (run.metrics.empty()) return "";
  std::string body = loss_chart(run);
  body += small_chart(run, "Gradient norm", "grad norm", "#6a3d9a", true, [](const StepRow& r) { return r.grad_norm; });
  body += small_chart(run, "Learning rate", "lr", "#2a9d8f", true, [](const StepRow& r) { return r.lr; });
  body += small_chart(run, "Expert imbalance", "busiest / mean", "#b5651d", false,
                      [](const StepRow& r) { return r.imbalance; });
  return section("Training", body,
                 "Loss of each committed step against its step number, with the run's events where they fell "
                 "between steps: failures (red), the stop (slate), drill actions and policy swaps (ticks), and "
                 "each recovery as a bar labelled with its duration. Below, the gradient norm before clipping, the "
                 "learning rate, and the busiest worker's expert tokens over the mean (1 is even), with the "
                 "recoveries shaded. Steps run again after a checkpoint restore are drawn as points.");
}

}  // namespace sal::report
