// svg.cpp — see svg.h. Coordinates are written with one decimal; text widths are estimated from
// character counts (no font metrics), which is enough to lay out legends and labels.
#include "report/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "report/html.h"

namespace sal::report {
namespace {

constexpr double kCharWidth = 6.6;  // estimated width of one character at 12px
constexpr const char* kAxis = "#666";
constexpr const char* kGrid = "#e8e8e8";

std::string f(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

size_t chars(const std::string& s) {
  return size_t(
      std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

double text_width(const std::string& s, double size = 12) { return double(chars(s)) * kCharWidth * size / 12; }

std::string open_svg(double w, double h) {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + f(w) + "\" height=\"" + f(h) + "\" viewBox=\"0 0 " +
         f(w) + " " + f(h) + "\" font-size=\"12\">\n";
}

std::string text(double x, double y, const std::string& s, const char* anchor = "start",
                 const std::string& extra = "") {
  return "<text x=\"" + f(x) + "\" y=\"" + f(y) + "\" text-anchor=\"" + anchor + "\"" +
         (extra.empty() ? "" : " " + extra) + ">" + escape(s) + "</text>\n";
}

std::string line(double x1, double y1, double x2, double y2, const std::string& color, const std::string& extra = "") {
  return "<line x1=\"" + f(x1) + "\" y1=\"" + f(y1) + "\" x2=\"" + f(x2) + "\" y2=\"" + f(y2) + "\" stroke=\"" + color +
         "\"" + (extra.empty() ? "" : " " + extra) + "/>\n";
}

std::string rect(double x, double y, double w, double h, const std::string& fill, const std::string& extra = "") {
  return "<rect x=\"" + f(x) + "\" y=\"" + f(y) + "\" width=\"" + f(std::max(w, 0.0)) + "\" height=\"" +
         f(std::max(h, 0.0)) + "\" fill=\"" + fill + "\"" + (extra.empty() ? "" : " " + extra) + "/>\n";
}

std::string tooltip(const std::string& s) { return s.empty() ? "" : "<title>" + escape(s) + "</title>"; }

std::string rotated(double x, double y, const std::string& s, int degrees) {
  return "<text transform=\"translate(" + f(x) + "," + f(y) + ") rotate(" + std::to_string(degrees) +
         ")\" text-anchor=\"middle\" fill=\"#333\">" + escape(s) + "</text>\n";
}

// ---- legend ----

std::string swatch(const LegendItem& item, double x, double y) {
  switch (item.swatch) {
    case Swatch::Line:
      return line(x, y, x + 18, y, item.color, "stroke-width=\"2.5\"");
    case Swatch::Dashed:
      return line(x, y, x + 18, y, item.color, "stroke-width=\"2\" stroke-dasharray=\"4,3\"");
    case Swatch::Box:
      return rect(x + 2, y - 5, 14, 10, item.color, "stroke=\"#bbb\"");
    case Swatch::Dot:
      return "<circle cx=\"" + f(x + 9) + "\" cy=\"" + f(y) + "\" r=\"3\" fill=\"" + item.color + "\"/>\n";
    case Swatch::Tick:
      return "<path d=\"M" + f(x + 4) + " " + f(y - 5) + " L" + f(x + 14) + " " + f(y - 5) + " L" + f(x + 9) + " " +
             f(y + 4) + " Z\" fill=\"" + item.color + "\"/>\n";
  }
  return "";
}

struct Legend {
  std::string svg;
  double height = 0;
};

// Items laid out left to right from (x0, y0), wrapping at `right`.
Legend legend(const std::vector<LegendItem>& items, double x0, double y0, double right) {
  Legend out;
  if (items.empty()) return out;
  constexpr double kRow = 20;
  double x = x0, y = y0 + 10;
  for (const auto& item : items) {
    double w = 24 + text_width(item.label) + 18;
    if (x > x0 && x + w > right) {
      x = x0;
      y += kRow;
    }
    out.svg += swatch(item, x, y) + text(x + 24, y + 4, item.label, "start", "fill=\"#333\"");
    x += w;
  }
  out.height = y - y0 + 14;
  return out;
}

// ---- line chart ----

struct Range {
  double lo = INFINITY, hi = -INFINITY;
  void add(double v) {
    if (!std::isfinite(v)) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return lo > hi; }
};

// Maps data to pixels inside the plot rectangle.
struct Frame {
  double left, top, w, h;
  Ticks x, y, y2;
  double px(double v) const { return left + (v - x.lo) / (x.hi - x.lo) * w; }
  double py(double v, bool right) const {
    const Ticks& t = right ? y2 : y;
    return top + h - (v - t.lo) / (t.hi - t.lo) * h;
  }
};

std::string series_path(const Series& s, const Frame& fr) {
  std::string d;
  bool pen = false;
  for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
    if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) {
      pen = false;
      continue;
    }
    double x = fr.px(s.x[i]), y = fr.py(s.y[i], s.right_axis);
    if (!pen) {
      d += "M" + f(x) + " " + f(y);
      pen = true;
    } else if (s.draw == Draw::Steps) {
      d += " H" + f(x) + " V" + f(y);
    } else {
      d += " L" + f(x) + " " + f(y);
    }
  }
  if (d.empty()) return "";
  return "<path d=\"" + d + "\" fill=\"none\" stroke=\"" + s.color + "\" stroke-width=\"" +
         (s.draw == Draw::Steps ? "2" : "1.6") + "\" stroke-linejoin=\"round\"/>\n";
}

std::string series_points(const Series& s, const Frame& fr) {
  std::string out = "<g fill=\"" + s.color + "\">";
  for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
    if (std::isfinite(s.x[i]) && std::isfinite(s.y[i]))
      out += "<circle cx=\"" + f(fr.px(s.x[i])) + "\" cy=\"" + f(fr.py(s.y[i], s.right_axis)) + "\" r=\"2.2\"/>";
  return out + "</g>\n";
}

// ---- the strip above the plot: labelled marks and spans ----

constexpr double kStripTop = 14;  // the plot's top without a strip
constexpr double kLane = 14;
constexpr double kStripFont = 11;

double span_right(const Span& s, const Frame& fr) { return std::max(fr.px(s.x1), fr.px(s.x0) + kMinSpanPx); }

// A strip item: what it covers from `left` to `right` (pixels) and its label, written after it
// unless that would run past the chart's right edge (then before it, right-aligned).
struct StripItem {
  double left = 0, right = 0;
  std::string label;
  bool before = false;
  int lane = -1;

  StripItem(double l, double r, std::string text, double edge) : left(l), right(r), label(std::move(text)) {
    before = right + width() > edge && left - width() >= 0;
  }
  // The label's room: estimated as for bold text (marks' labels are), which runs a fifth wider.
  double width() const { return label.empty() ? 0 : 3 + 1.2 * text_width(label, kStripFont); }
  std::pair<double, double> extent() const {
    return before ? std::pair{left - width(), right} : std::pair{left, right + width()};
  }
  std::string label_svg(double y, const std::string& style) const {
    if (label.empty() || lane < 0) return "";
    return text(before ? left - 3 : right + 3, y + 10, label, before ? "end" : "start", style);
  }
};

// The spans' and the labelled marks' items with their lanes (-1: none free), and the lanes used.
struct Strip {
  std::vector<StripItem> spans;
  std::vector<std::optional<StripItem>> marks;  // none for a mark without a label
  int lanes = 0;
  double height() const { return lanes > 0 ? lanes * kLane + 4 : 0; }
  double lane_y(int lane) const { return kStripTop + kLane * std::max(lane, 0); }
};

Strip strip_for(const LineChart& c, const Frame& fr) {
  Strip strip;
  double edge = double(c.width) - 2;
  std::vector<std::pair<double, double>> extents;
  for (const auto& s : c.spans) {
    strip.spans.emplace_back(fr.px(s.x0), span_right(s, fr), s.label, edge);
    extents.push_back(strip.spans.back().extent());
  }
  for (const auto& m : c.marks) {
    if (m.label.empty()) {
      strip.marks.emplace_back();
      continue;
    }
    strip.marks.emplace_back(StripItem(fr.px(m.x), fr.px(m.x), m.label, edge));
    extents.push_back(strip.marks.back()->extent());
  }
  std::vector<int> lanes = strip_lanes(extents);
  size_t next = 0;
  for (auto& item : strip.spans) item.lane = lanes[next++];
  for (auto& item : strip.marks)
    if (item) item->lane = lanes[next++];
  // a span with no free lane still shows its bar, in the last lane (without its label)
  bool crowded = std::any_of(strip.spans.begin(), strip.spans.end(), [](const StripItem& i) { return i.lane < 0; });
  strip.lanes = crowded ? kStripLanes : 0;
  for (int l : lanes) strip.lanes = std::max(strip.lanes, l + 1);
  return strip;
}

std::string span_shading(const Span& s, const Frame& fr) {
  double x0 = fr.px(s.x0);
  return "<g class=\"span-shade " + s.kind + "\">" + tooltip(s.title) +
         rect(x0, fr.top, span_right(s, fr) - x0, fr.h, s.color, "fill-opacity=\"0.22\"") + "</g>\n";
}

std::string draw_span(const Span& s, const StripItem& item, const Strip& strip) {
  double y = strip.lane_y(item.lane < 0 ? kStripLanes - 1 : item.lane);
  return "<g class=\"span " + s.kind + "\">" + tooltip(s.title) +
         rect(item.left, y + 3, item.right - item.left, 7, s.color) +
         item.label_svg(y, "font-size=\"11\" fill=\"#333\"") + "</g>\n";
}

std::string draw_mark(const Mark& m, const Frame& fr, const Strip& strip, const std::optional<StripItem>& item) {
  double x = fr.px(m.x);
  bool labelled = item && item->lane >= 0;
  std::string out = "<g class=\"mark " + m.kind + "\">" + tooltip(m.title);
  if (m.tick) {
    out += "<path d=\"M" + f(x - 5) + " " + f(fr.top) + " L" + f(x + 5) + " " + f(fr.top) + " L" + f(x) + " " +
           f(fr.top + 9) + " Z\" fill=\"" + m.color + "\"/>";
    out += line(x, fr.top, x, fr.top + 22, m.color, "stroke-width=\"2\"");
  } else {
    double top = labelled ? strip.lane_y(item->lane) + 1 : fr.top;  // up to its label
    out += line(x, top, x, fr.top + fr.h, m.color,
                std::string("stroke-width=\"1.5\"") + (m.dashed ? " stroke-dasharray=\"5,4\"" : ""));
  }
  if (labelled)
    out += item->label_svg(strip.lane_y(item->lane), "font-size=\"11\" font-weight=\"600\" fill=\"" + m.color + "\"");
  return out + "</g>\n";
}

std::string draw_axes(const LineChart& c, const Frame& fr, bool has_y2) {
  std::string out;
  for (double v : fr.y.values) {
    double y = fr.py(v, false);
    out += line(fr.left, y, fr.left + fr.w, y, kGrid);
    out += text(fr.left - 6, y + 4, tick_text(v, fr.y.step), "end", "fill=\"#444\"");
  }
  for (double v : fr.x.values) {
    double x = fr.px(v);
    out += line(x, fr.top + fr.h, x, fr.top + fr.h + 5, kAxis);
    out += text(x, fr.top + fr.h + 18, tick_text(v, fr.x.step), "middle", "fill=\"#444\"");
  }
  if (has_y2)
    for (double v : fr.y2.values) {
      double y = fr.py(v, true);
      out += line(fr.left + fr.w, y, fr.left + fr.w + 5, y, kAxis);
      out += text(fr.left + fr.w + 8, y + 4, tick_text(v, fr.y2.step), "start", "fill=\"#444\"");
    }
  out += line(fr.left, fr.top, fr.left, fr.top + fr.h, kAxis);
  out += line(fr.left, fr.top + fr.h, fr.left + fr.w, fr.top + fr.h, kAxis);
  if (has_y2) out += line(fr.left + fr.w, fr.top, fr.left + fr.w, fr.top + fr.h, kAxis);
  out += text(fr.left + fr.w / 2, fr.top + fr.h + 36, c.x_label, "middle", "fill=\"#333\"");
  out += rotated(16, fr.top + fr.h / 2, c.y_label, -90);
  if (has_y2) out += rotated(double(c.width) - 12, fr.top + fr.h / 2, c.y2_label, 90);
  return out;
}

// Ticks whose axis ends at the data ([lo, hi]) instead of the next nice number (for time axes).
Ticks tight(Ticks t, double lo, double hi) {
  if (!(hi > lo)) return t;
  t.lo = lo;
  t.hi = hi;
  double eps = t.step * 1e-9;
  t.values.erase(
      std::remove_if(t.values.begin(), t.values.end(), [&](double v) { return v < lo - eps || v > hi + eps; }),
      t.values.end());
  return t;
}

Frame frame_for(const LineChart& c, bool has_y2) {
  Range x, y, y2;
  for (const auto& s : c.series) {
    for (double v : s.x) x.add(v);
    for (double v : s.y) (s.right_axis ? y2 : y).add(v);
  }
  for (const auto& m : c.marks) x.add(m.x);
  for (const auto& b : c.bands) {
    x.add(b.x0);
    x.add(b.x1);
  }
  for (const auto& s : c.spans) {
    x.add(s.x0);
    x.add(s.x1);
  }
  for (Range* r : {&x, &y, &y2})
    if (r->empty()) *r = Range{0, 1};
  if (c.x_from_zero) x.add(0);
  if (c.y_from_zero) y.add(0);
  y2.add(0);
  Ticks yt = nice_ticks(y.lo, y.hi, c.height < 200 ? 4 : 6, c.y_integer);
  double widest = 0;  // the y tick labels', so that the axis label clears them
  for (double v : yt.values) widest = std::max(widest, text_width(tick_text(v, yt.step)));
  double left = std::max(double(c.left), 30 + widest + 8);
  Frame fr{left, kStripTop, double(c.width) - left - (has_y2 ? 64 : 24), double(c.height) - 14 - 46, {}, {}, {}};
  fr.x = tight(nice_ticks(x.lo, x.hi, 10, c.x_integer), x.lo, x.hi);
  fr.y = yt;
  fr.y2 = nice_ticks(y2.lo, y2.hi * 1.1, 5, c.y2_integer);
  return fr;
}

std::vector<LegendItem> legend_items(const LineChart& c) {
  std::vector<LegendItem> items;
  for (const auto& s : c.series)
    if (!s.name.empty()) items.push_back({s.name, s.color, s.draw == Draw::Points ? Swatch::Dot : Swatch::Line});
  items.insert(items.end(), c.legend.begin(), c.legend.end());
  return items;
}

}  // namespace

Ticks nice_ticks(double lo, double hi, int target, bool integer) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) {
    lo = 0;
    hi = 1;
  }
  if (hi < lo) std::swap(lo, hi);
  if (hi - lo < 1e-12 * std::max(1.0, std::fabs(lo))) {
    double pad = lo == 0 ? 1 : std::fabs(lo) * 0.1;
    if (lo != 0) lo -= pad;
    hi += pad;
  }
  double raw = (hi - lo) / std::max(target, 1);
  double mag = std::pow(10, std::floor(std::log10(raw)));
  double fr = raw / mag;
  double step = (fr <= 1 ? 1 : fr <= 2 ? 2 : fr <= 2.5 ? 2.5 : fr <= 5 ? 5 : 10) * mag;
  if (integer) step = step < 1 ? 1 : step == 2.5 ? 2 : step;
  Ticks t;
  t.step = step;
  t.lo = std::floor(lo / step + 1e-9) * step;
  t.hi = std::ceil(hi / step - 1e-9) * step;
  if (t.hi <= t.lo) t.hi = t.lo + step;
  int n = int(std::lround((t.hi - t.lo) / step));
  for (int i = 0; i <= n; ++i) t.values.push_back(t.lo + step * i);
  return t;
}

std::vector<int> strip_lanes(const std::vector<std::pair<double, double>>& extents, int lanes) {
  constexpr double kGap = 6;
  std::vector<size_t> order(extents.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return extents[a].first < extents[b].first; });
  std::vector<double> end(size_t(std::max(lanes, 0)), -INFINITY);
  std::vector<int> out(extents.size(), -1);
  for (size_t i : order)
    for (size_t k = 0; k < end.size(); ++k)
      if (extents[i].first >= end[k] + kGap) {
        out[i] = int(k);
        end[k] = extents[i].second;
        break;
      }
  return out;
}

std::string tick_text(double v, double step) {
  if (std::fabs(v) < std::fabs(step) * 1e-9) v = 0;
  const char* suffix = "";
  double scale = 1;
  if (std::fabs(step) >= 1e5) {
    suffix = "M";
    scale = 1e6;
  } else if (std::fabs(step) >= 100 && std::fabs(v) >= 1000) {
    suffix = "k";
    scale = 1e3;
  }
  double s = step / scale;
  int decimals = 0;
  while (decimals < 6 && std::fabs(std::round(s * std::pow(10, decimals)) - s * std::pow(10, decimals)) > 1e-6)
    ++decimals;
  if (scale > 1 && std::fabs(std::round(v / scale) - v / scale) < 1e-9) decimals = 0;  // "1k", not "1.0k"
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f%s", decimals, v / scale, v == 0 ? "" : suffix);
  return buf;
}

std::string palette(size_t i) {
  static const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
                                  "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"};
  return kColors[i % (sizeof kColors / sizeof kColors[0])];
}

std::string expert_color(size_t expert, size_t experts) {
  // HSL(h, 55%, 72%) -> RGB: hues spread evenly for a few experts, in golden-angle steps for many
  // (so neighbouring ids still differ).
  double degrees = experts > 0 && experts <= 12 ? double(expert) * 360.0 / double(experts) : double(expert) * 137.508;
  double h = std::fmod(degrees, 360.0) / 60.0;
  double s = 0.55, l = 0.72;
  double c = (1 - std::fabs(2 * l - 1)) * s, x = c * (1 - std::fabs(std::fmod(h, 2.0) - 1)), m = l - c / 2;
  double rgb[3] = {0, 0, 0};
  int sector = int(h) % 6;
  const int order[6][3] = {{0, 1, 2}, {1, 0, 2}, {2, 0, 1}, {2, 1, 0}, {1, 2, 0}, {0, 2, 1}};
  double parts[3] = {c, x, 0};
  for (int k = 0; k < 3; ++k) rgb[k] = parts[order[sector][k]];
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", int(std::lround((rgb[0] + m) * 255)),
                int(std::lround((rgb[1] + m) * 255)), int(std::lround((rgb[2] + m) * 255)));
  return buf;
}

std::string line_chart(const LineChart& c) {
  bool has_y2 = std::any_of(c.series.begin(), c.series.end(), [](const Series& s) { return s.right_axis; });
  Frame fr = frame_for(c, has_y2);
  Strip strip = strip_for(c, fr);
  fr.top += strip.height();
  double bottom = double(c.height) + strip.height();
  Legend leg = legend(legend_items(c), fr.left, bottom, double(c.width) - 8);
  std::string out = open_svg(c.width, bottom + leg.height + 4);
  out += rect(fr.left, fr.top, fr.w, fr.h, "#fff", "stroke=\"#ddd\"");
  for (const auto& b : c.bands)
    out += "<g class=\"band " + b.kind + "\">" + tooltip(b.title) +
           rect(fr.px(b.x0), fr.top, fr.px(b.x1) - fr.px(b.x0), fr.h, b.color, "fill-opacity=\"0.75\"") + "</g>\n";
  for (const auto& s : c.spans) out += span_shading(s, fr);
  out += draw_axes(c, fr, has_y2);
  for (const auto& s : c.series) out += s.draw == Draw::Points ? series_points(s, fr) : series_path(s, fr);
  for (size_t i = 0; i < c.marks.size(); ++i) out += draw_mark(c.marks[i], fr, strip, strip.marks[i]);
  for (size_t i = 0; i < c.spans.size(); ++i) out += draw_span(c.spans[i], strip.spans[i], strip);
  return out + leg.svg + "</svg>\n";
}

std::string stacked_bar(const std::vector<Segment>& segments, const std::string& unit, int width) {
  double total = 0;
  for (const auto& s : segments) total += std::max(s.value, 0.0);
  constexpr double kLeft = 8, kTop = 6, kHeight = 34;
  double w = double(width) - 2 * kLeft;
  std::vector<LegendItem> items;
  std::string bars;
  double x = kLeft;
  for (const auto& s : segments) {
    double share = total > 0 ? std::max(s.value, 0.0) / total : 0;
    std::string pct = num(share * 100, 1) + "%";
    std::string label = s.label + " " + num(s.value, s.value < 10 ? 2 : 1) + " " + unit + " (" + pct + ")";
    items.push_back({label, s.color, Swatch::Box});
    double sw = share * w;
    bars += "<g class=\"segment\">" + tooltip(label) + rect(x, kTop, sw, kHeight, s.color, "stroke=\"#fff\"");
    std::string inside = s.label + " " + pct;
    if (text_width(inside) + 8 < sw)
      bars += text(x + sw / 2, kTop + kHeight / 2 + 4, inside, "middle", "fill=\"#222\"");
    bars += "</g>\n";
    x += sw;
  }
  if (total <= 0) bars += rect(kLeft, kTop, w, kHeight, "#f4f4f4", "stroke=\"#ddd\"");
  Legend leg = legend(items, kLeft, kTop + kHeight + 4, double(width) - 8);
  return open_svg(width, kTop + kHeight + 8 + leg.height) + bars + leg.svg + "</svg>\n";
}

std::string bar_chart(const BarChart& c) {
  Range r;
  for (const auto& b : c.bars) r.add(b.value);
  if (r.empty()) r = Range{0, 1};
  r.add(0);
  Frame fr{56, 16, double(c.width) - 56 - 12, double(c.height) - 16 - 36, nice_ticks(0, 1), nice_ticks(r.lo, r.hi, 5),
           {}};
  std::string out = open_svg(c.width, c.height) + rect(fr.left, fr.top, fr.w, fr.h, "#fff", "stroke=\"#ddd\"");
  for (double v : fr.y.values) {
    double y = fr.py(v, false);
    out += line(fr.left, y, fr.left + fr.w, y, kGrid) +
           text(fr.left - 6, y + 4, tick_text(v, fr.y.step), "end", "fill=\"#444\"");
  }
  out += rotated(14, fr.top + fr.h / 2, c.y_label, -90);
  double slot = c.bars.empty() ? fr.w : fr.w / double(c.bars.size());
  size_t widest = 1;
  for (const auto& b : c.bars) widest = std::max({widest, chars(b.label), chars(b.note)});
  size_t every = size_t(std::max(1.0, std::ceil((double(widest) * kCharWidth * 10 / 12 + 4) / slot)));
  for (size_t i = 0; i < c.bars.size(); ++i) {
    const Bar& b = c.bars[i];
    double x = fr.left + slot * double(i), y = fr.py(b.value, false), base = fr.py(0, false);
    std::string value = num(b.value, c.decimals);
    std::string tip =
        b.label + ": " + value + (b.note.empty() ? "" : " (" + b.note + ")") + (b.title.empty() ? "" : " — " + b.title);
    out += "<g class=\"bar\">" + tooltip(tip) +
           rect(x + slot * 0.12, std::min(y, base), slot * 0.76, std::fabs(base - y), b.color,
                "stroke=\"#999\" stroke-width=\"0.5\"");
    if (text_width(value, 10) + 2 < slot)
      out += text(x + slot / 2, std::min(y, base) - 3, value, "middle", "font-size=\"10\" fill=\"#444\"");
    if (i % every == 0) {
      out += text(x + slot / 2, fr.top + fr.h + 14, b.label, "middle", "font-size=\"10\" fill=\"#333\"");
      if (!b.note.empty())
        out += text(x + slot / 2, fr.top + fr.h + 27, b.note, "middle", "font-size=\"10\" fill=\"#666\"");
    }
    out += "</g>\n";
  }
  out += line(fr.left, fr.top + fr.h, fr.left + fr.w, fr.top + fr.h, kAxis);
  return out + "</svg>\n";
}

std::string grid_chart(const Grid& g) {
  size_t cols = 1, label_chars = 4;
  for (const auto& row : g.rows) cols = std::max(cols, row.size());
  for (const auto& l : g.row_labels) label_chars = std::max(label_chars, chars(l));
  double label_w = double(label_chars) * kCharWidth + 12;
  double cell = std::clamp((double(g.width) - label_w - 4) / double(cols), 10.0, 30.0);
  double font = std::clamp(cell * 0.42, 7.0, 12.0);
  double width = label_w + cell * double(cols) + 4, height = cell * double(g.rows.size()) + 4;
  std::string out = open_svg(width, height);
  for (size_t r = 0; r < g.rows.size(); ++r) {
    double y = 2 + cell * double(r);
    if (r < g.row_labels.size()) out += text(label_w - 8, y + cell / 2 + 4, g.row_labels[r], "end", "fill=\"#333\"");
    for (size_t k = 0; k < g.rows[r].size(); ++k) {
      const Cell& c = g.rows[r][k];
      double x = label_w + cell * double(k);
      out += "<g class=\"cell\">" + tooltip(c.title) +
             rect(x, y, cell, cell, c.color, "stroke=\"#fff\" stroke-width=\"1.5\"");
      if (text_width(c.text, font) + 2 < cell)
        out += text(x + cell / 2, y + cell / 2 + font * 0.35, c.text, "middle",
                    "font-size=\"" + f(font) + "\" fill=\"#222\"");
      out += "</g>\n";
    }
  }
  return out + "</svg>\n";
}

}  // namespace sal::report
