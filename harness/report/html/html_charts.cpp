#include "harness/report/html/html_charts.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "harness/report/text/format.h"

namespace harness::html {
namespace {

constexpr double kFont = 12;       // labels
constexpr double kSmallFont = 11;  // ticks, sides, cell values
constexpr double kRowHeight = 18;
constexpr const char* kGrid = "#e2e2e2";
constexpr const char* kAxis = "#888888";
constexpr const char* kMuted = "#666666";

// "2.5", "12.5", "125": three significant digits at most, trailing zeros dropped.
std::string short_number(double value) {
  const double a = std::fabs(value);
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, a >= 100 ? "%.0f" : a >= 10 ? "%.1f" : "%.2f", value);
  std::string text = buffer;
  if (text.find('.') != std::string::npos) {
    while (text.back() == '0') text.pop_back();
    if (text.back() == '.') text.pop_back();
  }
  return text;
}

svg::Attributes with(svg::Attributes attrs, const svg::Attributes& more) {
  attrs.insert(attrs.end(), more.begin(), more.end());
  return attrs;
}

svg::Attributes text_style(double size, const char* anchor, const char* fill = "#222222") {
  return {{"font-size", svg::coord(size)}, {"text-anchor", anchor}, {"fill", fill}};
}

// The label column of row charts: row labels, then the base/head sides.
struct Columns {
  double label = 0;  // right edge of the labels
  double side = 0;   // right edge of the sides
};

template <typename Row>
Columns row_columns(const std::vector<Row>& rows) {
  double label = 60;
  bool sides = false;
  for (const Row& r : rows) {
    label = std::max(label, svg::text_width(r.label, kFont) + 8);
    sides = sides || !r.side.empty();
  }
  return {label, label + (sides ? 38 : 0)};
}

// Each row's top, from `top`: a gap before a row that starts a group (has a label).
template <typename Row>
std::vector<double> row_tops(const std::vector<Row>& rows, double top, double height,
                             double& bottom) {
  std::vector<double> tops;
  double y = top;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i > 0) y += rows[i].label.empty() ? 2 : 7;
    tops.push_back(y);
    y += height;
  }
  bottom = y;
  return tops;
}

template <typename Row>
void row_labels(svg::Document& doc, const Row& row, const Columns& columns, double top,
                double height) {
  const double baseline = top + height / 2 + 4;
  if (!row.label.empty())
    doc.text(columns.label - 6, baseline, row.label, text_style(kFont, "end"));
  if (!row.side.empty()) {
    doc.text(columns.side - 4, baseline, row.side, text_style(kSmallFont, "end", kMuted));
  }
}

// A horizontal value axis at `y` over [x0, x1]: grid lines up to `top`, tick labels, its label.
void value_axis(svg::Document& doc, const svg::Scale& scale, const std::vector<double>& ticks,
                Unit unit, double top, double y, const std::string& label) {
  for (double t : ticks) {
    const double x = scale(t);
    doc.line(x, top, x, y, {{"stroke", kGrid}});
    doc.text(x, y + 14, format_value(t, unit), text_style(kSmallFont, "middle", kMuted));
  }
  doc.line(scale(scale.lo()), y, scale(scale.hi()), y, {{"stroke", kAxis}});
  doc.text((scale(scale.lo()) + scale(scale.hi())) / 2, y + 31, label, text_style(kFont, "middle"));
}

// A row's note, cut with "…" to fit `width` (the whole note is its tooltip).
void row_note(svg::Document& doc, double x, double y, double width, const std::string& note) {
  std::string shown = note;
  if (svg::text_width(note, kSmallFont) > width) {
    const auto fits = static_cast<size_t>(std::max(0.0, width / (kSmallFont * 0.6) - 1));
    size_t bytes = 0, points = 0;
    while (bytes < note.size() && points < fits) {  // whole UTF-8 sequences only
      ++bytes;
      while (bytes < note.size() && (static_cast<unsigned char>(note[bytes]) & 0xC0) == 0x80)
        ++bytes;
      ++points;
    }
    shown = note.substr(0, bytes) + "…";
  }
  doc.text(x, y, shown,
           with(text_style(kSmallFont, "start", "#b00020"), {{"font-style", "italic"}}), note);
}

std::string mix(double t) {  // from #eef3f9 (0) to #1f4e8c (1)
  const int from[3] = {0xee, 0xf3, 0xf9};
  const int to[3] = {0x1f, 0x4e, 0x8c};
  char buffer[8];
  int c[3];
  for (int i = 0; i < 3; ++i) {
    c[i] = static_cast<int>(std::lround(from[i] + (to[i] - from[i]) * std::clamp(t, 0.0, 1.0)));
  }
  std::snprintf(buffer, sizeof buffer, "#%02x%02x%02x", c[0], c[1], c[2]);
  return buffer;
}

}  // namespace

std::string format_value(double value, Unit unit) {
  if (!std::isfinite(value)) return "-";
  const double a = std::fabs(value);
  switch (unit) {
    case Unit::Count: return format_number(value);
    case Unit::Nanoseconds:
      if (a == 0) return "0";
      if (a < 1e3) return short_number(value) + " ns";
      if (a < 1e6) return short_number(value / 1e3) + " µs";
      if (a < 1e9) return short_number(value / 1e6) + " ms";
      return short_number(value / 1e9) + " s";
    case Unit::Bytes:
      if (a < 1024) return short_number(value) + " B";
      if (a < 1024.0 * 1024) return short_number(value / 1024) + " KiB";
      if (a < 1024.0 * 1024 * 1024) return short_number(value / (1024.0 * 1024)) + " MiB";
      return short_number(value / (1024.0 * 1024 * 1024)) + " GiB";
  }
  return format_number(value);
}

const std::string& category_color(size_t index) {
  static const std::string colors[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                       "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  return colors[index % (sizeof colors / sizeof colors[0])];
}

std::string stacked_bar_chart(const BarChart& chart, double width) {
  const Columns columns = row_columns(chart.rows);
  const double x0 = columns.side + 8;
  const double x1 = std::max(x0 + 100, width - 64);
  double bottom = 0;
  const std::vector<double> tops = row_tops(chart.rows, 6, kRowHeight, bottom);
  double largest = 0;
  for (const BarRow& r : chart.rows) {
    double sum = 0;
    for (const Segment& s : r.segments) sum += s.value;
    largest = std::max({largest, sum, r.total.value_or(0)});
  }
  const std::vector<double> ticks = svg::linear_ticks(0, largest, 5);
  const svg::Scale scale = svg::Scale::linear(0, ticks.back(), x0, x1);
  const double axis_y = bottom + 4;
  svg::Document doc(width, axis_y + 40, chart.label, with({{"class", "chart"}}, chart.data));
  value_axis(doc, scale, ticks, chart.unit, 2, axis_y, chart.axis_label);
  for (size_t i = 0; i < chart.rows.size(); ++i) {
    const BarRow& row = chart.rows[i];
    const double top = tops[i];
    row_labels(doc, row, columns, top, kRowHeight);
    if (!row.note.empty()) {
      row_note(doc, x0 + 4, top + kRowHeight / 2 + 4, width - x0 - 8, row.note);
      continue;
    }
    doc.open_group(row.faded ? svg::Attributes{{"opacity", "0.5"}} : svg::Attributes{});
    double at = 0;
    for (const Segment& s : row.segments) {
      if (s.value > 0) {
        doc.rect(
            scale(at), top + 2, scale(at + s.value) - scale(at), kRowHeight - 4,
            with({{"fill", s.color}, {"stroke", "#ffffff"}, {"stroke-width", "0.5"}}, s.mark.data),
            s.mark.title);
      }
      at += s.value;
    }
    doc.close_group();
    if (row.total) {
      doc.text(scale(std::max(at, *row.total)) + 4, top + kRowHeight / 2 + 4,
               format_value(*row.total, chart.unit),
               with(text_style(kSmallFont, "start"), row.total_mark.data), row.total_mark.title);
    }
  }
  return doc.finish();
}

std::string log_log_chart(const LineChart& chart, double width, double height) {
  double legend = 0;
  for (const Series& s : chart.series) legend = std::max(legend, svg::text_width(s.name, kFont));
  const double left = 68, top = 12, bottom = height - 46, right = width - legend - 48;
  double x_lo = 0, x_hi = 0, y_lo = 0, y_hi = 0;
  bool any = false;
  for (const Series& s : chart.series) {
    for (const auto* list : {&s.points, &s.dots}) {
      for (const Point& p : *list) {
        if (!(p.x > 0 && p.y > 0)) continue;
        if (!any) x_lo = x_hi = p.x, y_lo = y_hi = p.y;
        x_lo = std::min(x_lo, p.x), x_hi = std::max(x_hi, p.x);
        y_lo = std::min(y_lo, p.y), y_hi = std::max(y_hi, p.y);
        any = true;
      }
    }
  }
  svg::Document doc(width, height, chart.label, with({{"class", "chart"}}, chart.data));
  if (!any) {
    doc.text(width / 2, height / 2, "nothing to draw", text_style(kFont, "middle", kMuted));
    return doc.finish();
  }
  const std::vector<double> xt = svg::decade_ticks(x_lo, x_hi);
  const std::vector<double> yt = svg::decade_ticks(y_lo, y_hi);
  const svg::Scale xs = svg::Scale::log10(xt.front(), xt.back(), left, right);
  const svg::Scale ys = svg::Scale::log10(yt.front(), yt.back(), bottom, top);
  // Minor grid lines at 2..9 x each decade, then the decades with their labels.
  for (size_t i = 0; i + 1 < xt.size(); ++i) {
    for (int m = 2; m < 10; ++m)
      doc.line(xs(xt[i] * m), top, xs(xt[i] * m), bottom, {{"stroke", "#f3f3f3"}});
  }
  for (size_t i = 0; i + 1 < yt.size(); ++i) {
    for (int m = 2; m < 10; ++m)
      doc.line(left, ys(yt[i] * m), right, ys(yt[i] * m), {{"stroke", "#f3f3f3"}});
  }
  for (double t : xt) {
    doc.line(xs(t), top, xs(t), bottom, {{"stroke", kGrid}});
    doc.text(xs(t), bottom + 15, format_value(t, chart.x_unit),
             text_style(kSmallFont, "middle", kMuted));
  }
  for (double t : yt) {
    doc.line(left, ys(t), right, ys(t), {{"stroke", kGrid}});
    doc.text(left - 6, ys(t) + 4, format_value(t, chart.y_unit),
             text_style(kSmallFont, "end", kMuted));
  }
  doc.line(left, bottom, right, bottom, {{"stroke", kAxis}});
  doc.line(left, top, left, bottom, {{"stroke", kAxis}});
  doc.text((left + right) / 2, bottom + 34, chart.x_label, text_style(kFont, "middle"));
  const double y_mid = (top + bottom) / 2;
  doc.text(14, y_mid, chart.y_label,
           with(text_style(kFont, "middle"),
                {{"transform", "rotate(-90 14 " + svg::coord(y_mid) + ")"}}));
  for (size_t i = 0; i < chart.series.size(); ++i) {
    const Series& s = chart.series[i];
    for (const Point& p : s.dots) {
      if (p.x > 0 && p.y > 0) {
        doc.circle(xs(p.x), ys(p.y), 2.2,
                   with({{"fill", s.color}, {"fill-opacity", "0.35"}}, p.mark.data), p.mark.title);
      }
    }
    std::vector<Point> points;
    for (const Point& p : s.points) {
      if (p.x > 0 && p.y > 0) points.push_back(p);
    }
    std::stable_sort(points.begin(), points.end(),
                     [](const Point& a, const Point& b) { return a.x < b.x; });
    std::vector<std::pair<double, double>> line;
    for (const Point& p : points) line.emplace_back(xs(p.x), ys(p.y));
    svg::Attributes stroke = {{"stroke", s.color}, {"stroke-width", "2"}};
    if (s.dashed) stroke.emplace_back("stroke-dasharray", "6 4");
    if (line.size() > 1) doc.polyline(line, stroke);
    for (const Point& p : points) {
      doc.circle(xs(p.x), ys(p.y), 4,
                 with({{"fill", s.dashed ? "#ffffff" : s.color},
                       {"stroke", s.color},
                       {"stroke-width", "1.5"}},
                      p.mark.data),
                 p.mark.title);
    }
    const double ly = top + 8 + 20.0 * static_cast<double>(i);
    doc.line(right + 14, ly, right + 38, ly, stroke);
    doc.text(right + 44, ly + 4, s.name, text_style(kFont, "start"));
  }
  return doc.finish();
}

std::string strip_chart(const StripChart& chart, double width) {
  const Columns columns = row_columns(chart.rows);
  const double x0 = columns.side + 10;
  const double x1 = std::max(x0 + 100, width - 72);
  constexpr double kStripRow = 22;
  double bottom = 0;
  const std::vector<double> tops = row_tops(chart.rows, 6, kStripRow, bottom);
  double smallest = 0, largest = 0;
  auto take = [&](double v) {
    if (v > 0 && (smallest == 0 || v < smallest)) smallest = v;
    largest = std::max(largest, v);
  };
  for (const StripRow& r : chart.rows) {
    for (const Point& p : r.samples) take(p.x);
    if (r.median) take(r.median->x);
    if (r.max) take(*r.max);
  }
  // Dots are positions, not lengths: the axis starts near the data when they are far from 0.
  const bool log = smallest > 0 && largest > 50 * smallest;
  const double from = smallest > 0.25 * largest ? smallest : 0;
  const std::vector<double> ticks =
      log ? svg::decade_ticks(smallest, largest) : svg::linear_ticks(from, largest, 6);
  const svg::Scale scale = log ? svg::Scale::log10(ticks.front(), ticks.back(), x0, x1)
                               : svg::Scale::linear(ticks.front(), ticks.back(), x0, x1);
  const double axis_y = bottom + 4;
  svg::Document doc(width, axis_y + 40, chart.label, with({{"class", "chart"}}, chart.data));
  value_axis(doc, scale, ticks, chart.unit, 2, axis_y,
             chart.axis_label + (log ? " (log scale)" : ""));
  for (size_t i = 0; i < chart.rows.size(); ++i) {
    const StripRow& row = chart.rows[i];
    const double mid = tops[i] + kStripRow / 2;
    row_labels(doc, row, columns, tops[i], kStripRow);
    if (!row.note.empty()) {
      row_note(doc, x0 + 4, mid + 4, width - x0 - 8, row.note);
      continue;
    }
    if (row.min && row.max) {
      doc.line(scale(*row.min), mid, scale(*row.max), mid, {{"stroke", "#9a9a9a"}});
    }
    for (size_t k = 0; k < row.samples.size(); ++k) {
      const Point& p = row.samples[k];
      const double jitter = (static_cast<double>(k % 5) - 2) * 2.2;
      doc.circle(
          scale(p.x), mid + jitter, 3.2,
          with({{"fill", row.color}, {"fill-opacity", row.faded ? "0.35" : "0.7"}}, p.mark.data),
          p.mark.title);
    }
    if (row.median) {
      doc.open_group(row.median->mark.data, row.median->mark.title);
      doc.line(scale(row.median->x), mid - 8, scale(row.median->x), mid + 8,
               {{"stroke", "#222222"}, {"stroke-width", "2"}});
      doc.text(x1 + 6, mid + 4, format_value(row.median->x, chart.unit),
               text_style(kSmallFont, "start"));
      doc.close_group();
    }
  }
  return doc.finish();
}

std::string heatmap(const Heatmap& chart, double width) {
  const Columns columns = row_columns(chart.rows);
  const double x0 = columns.side + 8;
  const double n = static_cast<double>(std::max<size_t>(1, chart.columns.size()));
  double cell = (width - x0 - 4) / n;
  double header_width = 0;
  for (const std::string& c : chart.columns)
    header_width = std::max(header_width, svg::text_width(c, kSmallFont));
  // Headers too wide for their cells are turned 35 degrees (cos 0.82, sin 0.57); the last one
  // must still end inside the chart.
  const bool rotate = header_width > cell - 6;
  if (rotate) {
    const double last = svg::text_width(chart.columns.back(), kSmallFont) * 0.82;
    cell = std::min(cell, (width - x0 - 4 - last) / (n - 0.5));
  }
  const double header = rotate ? header_width * 0.57 + 16 : 22;
  constexpr double kCellRow = 22;
  double bottom = 0;
  const std::vector<double> tops = row_tops(chart.rows, header + 4, kCellRow, bottom);
  double smallest = 0, largest = 0;
  bool any = false;
  for (const HeatRow& r : chart.rows) {
    for (const HeatCell& c : r.cells) {
      if (!c.present || !c.value) continue;
      smallest = any ? std::min(smallest, *c.value) : *c.value;
      largest = any ? std::max(largest, *c.value) : *c.value;
      any = true;
    }
  }
  svg::Document doc(width, bottom + 6, chart.label, with({{"class", "chart"}}, chart.data));
  for (size_t j = 0; j < chart.columns.size(); ++j) {
    const double cx = x0 + cell * (static_cast<double>(j) + 0.5);
    if (rotate) {
      doc.text(cx, header - 4, chart.columns[j],
               with(text_style(kSmallFont, "start"),
                    {{"transform",
                      "rotate(-35 " + svg::coord(cx) + " " + svg::coord(header - 4) + ")"}}));
    } else {
      doc.text(cx, header - 6, chart.columns[j], text_style(kSmallFont, "middle"));
    }
  }
  for (size_t i = 0; i < chart.rows.size(); ++i) {
    const HeatRow& row = chart.rows[i];
    row_labels(doc, row, columns, tops[i], kCellRow);
    for (size_t j = 0; j < row.cells.size() && j < chart.columns.size(); ++j) {
      const HeatCell& c = row.cells[j];
      if (!c.present) continue;
      const double x = x0 + cell * static_cast<double>(j);
      const double t =
          c.value && largest > smallest ? (*c.value - smallest) / (largest - smallest) : 0;
      doc.rect(x + 1, tops[i], cell - 2, kCellRow - 1,
               with({{"fill", c.value ? mix(t) : "#eeeeee"}}, c.mark.data), c.mark.title);
      doc.text(x + cell / 2, tops[i] + kCellRow / 2 + 4,
               c.value ? format_value(*c.value, chart.unit) : "n/a",
               with(text_style(kSmallFont, "middle", t > 0.55 ? "#ffffff" : "#222222"),
                    {{"pointer-events", "none"}}));
    }
  }
  return doc.finish();
}

}  // namespace harness::html
