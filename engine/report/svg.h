// svg.h — small SVG chart builders for the reports: a line chart (optional second y axis, vertical
// marks for events, shaded bands for intervals, labelled spans in a strip above the plot, a legend),
// one stacked horizontal bar, a bar chart, and a grid of labelled cells. Each returns one
// self-contained <svg> element; every text passed in is escaped here. Marks, bands and spans carry
// class="mark KIND" / "band KIND" / "span KIND" so a page (or a test) can tell them apart.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace sal::report {

// Axis ticks at "nice" numbers (1, 2, 2.5 or 5 × 10^k) covering [lo, hi]; `integer` keeps steps >= 1
// and whole (for counts such as workers).
struct Ticks {
  double lo = 0, hi = 1, step = 1;
  std::vector<double> values;
};
Ticks nice_ticks(double lo, double hi, int target = 6, bool integer = false);
// A tick value with the decimals its step needs; thousands and millions as "k" and "M".
std::string tick_text(double v, double step);

// Distinct colors for categories (runs, series), cycling after ten.
std::string palette(size_t i);
// A light color per expert, spread around the hue wheel, as "#rrggbb".
std::string expert_color(size_t expert, size_t experts);

enum class Draw { Line, Steps, Points };
enum class Swatch { Line, Dashed, Box, Dot, Tick };

struct Series {
  std::string name;  // in the legend when not empty
  std::string color;
  Draw draw = Draw::Line;
  bool right_axis = false;
  std::vector<double> x, y;  // non-finite y breaks a line
};

// A vertical line across the plot at x (or, with `tick`, a small marker at its top). A `label` is
// written in the strip above the plot, beside x.
struct Mark {
  double x = 0;
  std::string kind;  // CSS class after "mark"
  std::string color;
  std::string title;  // tooltip
  bool dashed = true;
  bool tick = false;
  std::string label;
};

// A shaded interval [x0, x1] behind the data.
struct Band {
  double x0 = 0, x1 = 0;
  std::string kind;  // CSS class after "band"
  std::string color;
  std::string title;
};

// An interval drawn as a bar in the strip above the plot with its label beside it, and shaded
// lightly in the plot: however narrow [x0, x1] is on the axis (a 0.1 s recovery in a 60 s run),
// the bar is at least kMinSpanPx wide and the label (its duration, say) stays readable. Labels that
// would overlap go to the next lane of the strip.
struct Span {
  double x0 = 0, x1 = 0;
  std::string kind;   // CSS class after "span"
  std::string color;  // the bar's; the shading is this color, lighter
  std::string label;  // beside the bar
  std::string title;  // tooltip
};
inline constexpr double kMinSpanPx = 4;
inline constexpr int kStripLanes = 3;  // beyond this, a label is left out (its tooltip stays)

// Lanes for items covering [left, right] pixels (in any order): each goes to the first lane whose
// items it does not overlap (with a gap); -1 when all `lanes` are taken there.
std::vector<int> strip_lanes(const std::vector<std::pair<double, double>>& extents, int lanes = kStripLanes);

struct LegendItem {
  std::string label;
  std::string color;
  Swatch swatch = Swatch::Line;
};

struct LineChart {
  std::string x_label, y_label, y2_label;
  std::vector<Series> series;
  std::vector<Mark> marks;
  std::vector<Band> bands;
  std::vector<Span> spans;
  std::vector<LegendItem> legend;  // shown after the named series (for marks, bands and spans)
  bool x_from_zero = true, y_from_zero = true;
  bool x_integer = false, y_integer = false, y2_integer = true;  // whole-number ticks (for counts)
  int width = 960, height = 300;              // plot and axes; the legend adds rows below
  int left = 64;  // the plot's left edge at least (charts stacked with one left align their x axes)
};
std::string line_chart(const LineChart& c);

struct Segment {
  std::string label;
  double value = 0;
  std::string color;
};
// One horizontal bar split into segments; the legend below says "label 12.3 s (45.0%)" for each.
std::string stacked_bar(const std::vector<Segment>& segments, const std::string& unit, int width = 960);

struct Bar {
  std::string label;  // under the bar
  double value = 0;
  std::string color;
  std::string note;   // a second line under the label (e.g. "×2")
  std::string title;  // tooltip, after label and value
};
struct BarChart {
  std::string y_label;
  std::vector<Bar> bars;
  int decimals = 0;  // of the value printed above each bar
  int width = 960, height = 220;
};
std::string bar_chart(const BarChart& c);

struct Cell {
  std::string text;
  std::string color;
  std::string title;
};
// Rows of cells with a label each (rows may differ in length); cells shrink to fit `width`.
struct Grid {
  std::vector<std::string> row_labels;
  std::vector<std::vector<Cell>> rows;
  int width = 960;
};
std::string grid_chart(const Grid& g);

}  // namespace sal::report
