#include "harness/report/html/svg.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace harness::svg {

std::string escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: {
        const auto u = static_cast<unsigned char>(c);
        out += (u < 0x20 && c != '\t' && c != '\n' && c != '\r') || u == 0x7f ? '?' : c;
      }
    }
  }
  return out;
}

std::string coord(double value) {
  if (!std::isfinite(value)) return "0";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.2f", value);
  std::string text = buffer;
  while (text.back() == '0') text.pop_back();
  if (text.back() == '.') text.pop_back();
  return text == "-0" ? "0" : text;
}

std::string exact(double value) {
  if (!std::isfinite(value)) return "";
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

double text_width(const std::string& text, double font_size) {
  size_t code_points = 0;
  for (char c : text) code_points += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return static_cast<double>(code_points) * font_size * 0.6;
}

Document::Document(double width, double height, const std::string& label, const Attributes& attrs) {
  out_ = "<svg width=\"" + coord(width) + "\" height=\"" + coord(height) + "\" viewBox=\"0 0 " +
         coord(width) + " " + coord(height) + "\" role=\"img\" aria-label=\"" + escape(label) +
         "\"";
  for (const auto& [name, value] : attrs) out_ += " " + name + "=\"" + escape(value) + "\"";
  out_ += ">\n";
}

void Document::element(const char* name, const Attributes& geometry, const Attributes& attrs,
                       const std::string& title, const std::string& content) {
  out_ += "<";
  out_ += name;
  for (const auto& list : {&geometry, &attrs}) {
    for (const auto& [key, value] : *list) out_ += " " + key + "=\"" + escape(value) + "\"";
  }
  if (title.empty() && content.empty()) {
    out_ += "/>\n";
    return;
  }
  out_ += ">";
  if (!title.empty()) out_ += "<title>" + escape(title) + "</title>";
  out_ += escape(content) + "</" + name + ">\n";
}

void Document::rect(double x, double y, double width, double height, const Attributes& attrs,
                    const std::string& title) {
  element("rect",
          {{"x", coord(x)},
           {"y", coord(y)},
           {"width", coord(std::max(0.0, width))},
           {"height", coord(std::max(0.0, height))}},
          attrs, title);
}

void Document::line(double x1, double y1, double x2, double y2, const Attributes& attrs) {
  element("line", {{"x1", coord(x1)}, {"y1", coord(y1)}, {"x2", coord(x2)}, {"y2", coord(y2)}},
          attrs, "");
}

void Document::polyline(const std::vector<std::pair<double, double>>& points,
                        const Attributes& attrs) {
  std::string list;
  for (const auto& [x, y] : points) list += (list.empty() ? "" : " ") + coord(x) + "," + coord(y);
  element("polyline", {{"points", list}, {"fill", "none"}}, attrs, "");
}

void Document::circle(double cx, double cy, double r, const Attributes& attrs,
                      const std::string& title) {
  element("circle", {{"cx", coord(cx)}, {"cy", coord(cy)}, {"r", coord(r)}}, attrs, title);
}

void Document::text(double x, double y, const std::string& content, const Attributes& attrs,
                    const std::string& title) {
  element("text", {{"x", coord(x)}, {"y", coord(y)}}, attrs, title, content);
}

void Document::open_group(const Attributes& attrs, const std::string& title) {
  out_ += "<g";
  for (const auto& [key, value] : attrs) out_ += " " + key + "=\"" + escape(value) + "\"";
  out_ += ">";
  if (!title.empty()) out_ += "<title>" + escape(title) + "</title>";
  out_ += "\n";
  ++open_groups_;
}

void Document::close_group() {
  if (open_groups_ == 0) return;
  out_ += "</g>\n";
  --open_groups_;
}

std::string Document::finish() {
  while (open_groups_ > 0) close_group();
  std::string done = std::move(out_) + "</svg>\n";
  out_.clear();
  return done;
}

Scale::Scale(double lo, double hi, double from, double to, bool log)
    : lo_(lo), hi_(hi), from_(from), to_(to), log_(log) {}

Scale Scale::linear(double lo, double hi, double from, double to) {
  return Scale(lo, hi > lo ? hi : lo + 1, from, to, false);
}

Scale Scale::log10(double lo, double hi, double from, double to) {
  lo = lo > 0 ? lo : 1;
  return Scale(lo, hi > lo ? hi : lo * 10, from, to, true);
}

double Scale::operator()(double value) const {
  double t;
  if (log_) {
    t = value > 0 ? (std::log10(value) - std::log10(lo_)) / (std::log10(hi_) - std::log10(lo_)) : 0;
  } else {
    t = (value - lo_) / (hi_ - lo_);
  }
  return from_ + t * (to_ - from_);
}

std::vector<double> linear_ticks(double min, double max, int count) {
  if (!std::isfinite(min) || !std::isfinite(max)) return {0, 1};
  if (!(max > min)) max = min + (min == 0 ? 1 : std::fabs(min));
  const double raw = (max - min) / std::max(1, count);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * magnitude;
    if (step >= raw) break;
  }
  const double first = std::floor(min / step + 1e-9);
  std::vector<double> ticks;
  for (int i = 0;; ++i) {
    const double tick = step * (first + i);  // multiplied, not summed: no drift
    ticks.push_back(tick);
    if (tick >= max * (1 - 1e-12) && ticks.size() > 1) break;
  }
  return ticks;
}

std::vector<double> decade_ticks(double lo, double hi) {
  lo = lo > 0 ? lo : 1;
  hi = hi > lo ? hi : lo;
  const int first = static_cast<int>(std::floor(std::log10(lo) + 1e-9));
  int last = static_cast<int>(std::ceil(std::log10(hi) - 1e-9));
  if (last <= first) last = first + 1;
  std::vector<double> ticks;
  for (int e = first; e <= last; ++e) ticks.push_back(std::pow(10.0, e));
  return ticks;
}

}  // namespace harness::svg
