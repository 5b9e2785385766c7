#pragma once
// The charts of the HTML report, drawn as inline SVG (svg.h) from small chart models: stacked
// horizontal bars, a log-log line chart, a strip plot and a heatmap. The models hold values,
// labels, tooltips and data attributes already taken from a report (html_scenario.cpp does that);
// these functions only lay them out, so every number drawn is one the model was given.
//
// Rows may come in pairs (base and head of a comparison): a row with a `side` shows it beside the
// bar, and a `faded` row is drawn lighter.
#include <optional>
#include <string>
#include <vector>

#include "harness/report/html/svg.h"

namespace harness::html {

enum class Unit { Count, Nanoseconds, Bytes };

// A value for axes and labels: counts as format_number, times as "2.5 ms", bytes as "259.5 KiB".
std::string format_value(double value, Unit unit);

// The categorical colours of phases and series (Tableau 10), by index, repeating after ten.
const std::string& category_color(size_t index);

// A mark's tooltip and data attributes (data-variant, data-metric, data-value, ...).
struct Mark {
  std::string title;
  svg::Attributes data;
};

struct Segment {
  double value = 0;  // the bar's length it adds
  std::string color;
  Mark mark;
};

struct BarRow {
  std::string label;  // the variant; empty on the second row of a pair
  std::string side;   // "base" / "head" in a comparison, else ""
  bool faded = false;
  std::vector<Segment> segments;  // stacked left to right
  std::optional<double> total;    // written at the bar's end
  Mark total_mark;
  std::string note;  // instead of a bar: why there is none ("FAILED: ...")
};

struct BarChart {
  std::string label;       // accessible name
  std::string axis_label;  // under the x axis
  Unit unit = Unit::Count;
  std::vector<BarRow> rows;
  svg::Attributes data;  // on the <svg>
};
std::string stacked_bar_chart(const BarChart& chart, double width);

struct Point {
  double x = 0;
  double y = 0;
  Mark mark;
};

struct Series {
  std::string name;  // in the legend
  std::string color;
  bool dashed = false;
  std::vector<Point> points;  // joined by a line, in x order
  std::vector<Point> dots;    // drawn small and light, not joined (e.g. every sample)
};

// Both axes log10; points with x or y <= 0 are not drawn (the caller says so).
struct LineChart {
  std::string label;
  std::string x_label;
  std::string y_label;
  Unit x_unit = Unit::Count;
  Unit y_unit = Unit::Count;
  std::vector<Series> series;
  svg::Attributes data;
};
std::string log_log_chart(const LineChart& chart, double width, double height);

struct StripRow {
  std::string label;
  std::string side;
  bool faded = false;
  std::string color;
  std::vector<Point> samples;   // x: the value; drawn as dots, jittered vertically by index
  std::optional<Point> median;  // a tick, labelled at the row's end
  std::optional<double> min;    // a whisker from min to max
  std::optional<double> max;
  std::string note;
};

// One row per series of values on a shared x axis: linear (from 0, or from near the smallest value
// when that is above a quarter of the largest), or log10 when the largest value is more than 50
// times the smallest.
struct StripChart {
  std::string label;
  std::string axis_label;
  Unit unit = Unit::Nanoseconds;
  std::vector<StripRow> rows;
  svg::Attributes data;
};
std::string strip_chart(const StripChart& chart, double width);

struct HeatCell {
  std::optional<double> value;  // empty: drawn grey, "n/a"
  bool present = true;          // false: the row has no such column (an empty cell)
  Mark mark;
};

struct HeatRow {
  std::string label;
  std::string side;
  std::vector<HeatCell> cells;  // one per column
};

// Cells shaded by value, from the chart's smallest (lightest) to its largest (darkest), with the
// value written in them.
struct Heatmap {
  std::string label;
  std::vector<std::string> columns;
  Unit unit = Unit::Bytes;
  std::vector<HeatRow> rows;
  svg::Attributes data;
};
std::string heatmap(const Heatmap& chart, double width);

}  // namespace harness::html
