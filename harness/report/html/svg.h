#pragma once
// A small SVG writer for the charts of the HTML report (html_report.h): elements appended to a
// string, every text and attribute value escaped, numbers written the same way on every run and
// every machine (no locale, no time, no randomness), and the scales and ticks of chart axes.
// It knows nothing of reports; html_charts.h draws charts with it.
#include <string>
#include <utility>
#include <vector>

namespace harness::svg {

// Text made safe for XML and HTML, in element content and in quoted attribute values: & < > " '
// become entities; control characters other than tab and line breaks (invalid in XML) become '?'.
std::string escape(const std::string& text);

// A coordinate or length: fixed, at most 2 decimals, trailing zeros dropped ("12.5", "3", "0").
std::string coord(double value);

// A value as data attributes and tooltips carry it: the shortest text that reads back as the same
// double ("20", "2.4", "1234567.5"); "" when the value is not finite.
std::string exact(double value);

// The width of `text` in pixels, estimated for the report's sans-serif font at `font_size` (an
// upper bound for ASCII; used to size label columns, never to position text precisely).
double text_width(const std::string& text, double font_size);

// (name, value) pairs of an element, values unescaped: the writer escapes them. Kept in order.
using Attributes = std::vector<std::pair<std::string, std::string>>;

// One <svg> element, to be inlined in HTML (no xmlns: the HTML parser puts it in the SVG namespace;
// the page then holds no URL at all). Marks take an optional tooltip, written as a <title> child.
class Document {
 public:
  // `label`: the chart's accessible name (aria-label). `attrs`: more attributes of the root.
  Document(double width, double height, const std::string& label, const Attributes& attrs = {});

  void rect(double x, double y, double width, double height, const Attributes& attrs,
            const std::string& title = "");
  void line(double x1, double y1, double x2, double y2, const Attributes& attrs);
  void polyline(const std::vector<std::pair<double, double>>& points, const Attributes& attrs);
  void circle(double cx, double cy, double r, const Attributes& attrs,
              const std::string& title = "");
  void text(double x, double y, const std::string& content, const Attributes& attrs,
            const std::string& title = "");
  void open_group(const Attributes& attrs, const std::string& title = "");
  void close_group();

  // The document, every open group closed. The Document is left empty.
  std::string finish();

 private:
  void element(const char* name, const Attributes& geometry, const Attributes& attrs,
               const std::string& title, const std::string& content = "");

  std::string out_;
  int open_groups_ = 0;
};

// Maps values of [lo, hi] onto pixels [from, to] (to < from for a y axis drawn upwards), linearly
// or on a log10 scale (lo > 0).
class Scale {
 public:
  static Scale linear(double lo, double hi, double from, double to);
  static Scale log10(double lo, double hi, double from, double to);
  double operator()(double value) const;
  bool is_log() const { return log_; }
  double lo() const { return lo_; }
  double hi() const { return hi_; }

 private:
  Scale(double lo, double hi, double from, double to, bool log);
  double lo_, hi_, from_, to_;
  bool log_;
};

// Ticks of a linear axis over [min, max]: about `count` steps of 1, 2 or 5 x 10^k, the first at or
// below `min`, the last at or above `max` (the axis's ends). An empty range gives two ticks.
std::vector<double> linear_ticks(double min, double max, int count);

// Ticks of a log axis: the powers of ten from the one at or below `lo` to the one at or above `hi`
// (lo, hi > 0).
std::vector<double> decade_ticks(double lo, double hi);

}  // namespace harness::svg
