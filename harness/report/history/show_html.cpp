// bench history show --format html: trend charts in the HTML report's style (see show.h).
#include <algorithm>
#include <map>

#include "harness/report/history/show.h"
#include "harness/report/html/html_charts.h"
#include "harness/report/html/html_report.h"
#include "harness/report/html/svg.h"

namespace harness::history {
namespace {

using svg::escape;

constexpr double kWidth = 1240, kHeight = 300;
constexpr double kFont = 12, kSmallFont = 11;
constexpr const char* kGrid = "#e2e2e2";
constexpr const char* kAxis = "#888888";
constexpr const char* kMuted = "#666666";
constexpr const char* kRise = "#c62828";  // a regression: every metric kept is better lower
constexpr const char* kFall = "#2e7d32";

svg::Attributes with(svg::Attributes attrs, const svg::Attributes& more) {
  attrs.insert(attrs.end(), more.begin(), more.end());
  return attrs;
}
svg::Attributes text_style(double size, const char* anchor, const char* fill = "#222222") {
  return {{"font-size", svg::coord(size)}, {"text-anchor", anchor}, {"fill", fill}};
}

html::Unit unit_of(const std::string& unit) {
  return unit == "ns" ? html::Unit::Nanoseconds
         : unit == "bytes" ? html::Unit::Bytes
                           : html::Unit::Count;
}

std::string short_commit(const std::string& commit) { return commit.substr(0, 7); }

// One metric of one scenario: a line per variant over the runs any of them has.
using FindingsOf = std::map<const Series*, const std::vector<Finding>*>;

std::string trend_chart(const std::vector<const Series*>& lines, const FindingsOf& findings) {
  std::vector<Run> runs;  // the x axis: in history order
  for (const Series* s : lines) {
    for (const Point& p : s->points) runs.push_back(p.run);
  }
  std::sort(runs.begin(), runs.end(), [](const Run& a, const Run& b) {
    return a.date != b.date ? a.date < b.date : a.id < b.id;
  });
  runs.erase(std::unique(runs.begin(), runs.end(),
                         [](const Run& a, const Run& b) { return a.id == b.id; }),
             runs.end());
  std::map<int64_t, size_t> x_of;
  for (size_t i = 0; i < runs.size(); ++i) x_of[runs[i].id] = i;

  const Series& first = *lines.front();
  const html::Unit unit = unit_of(first.unit);
  double lo = 0, hi = 0;
  bool any = false;
  for (const Series* s : lines) {
    for (const Point& p : s->points) {
      if (!p.value) continue;
      lo = any ? std::min(lo, *p.value) : *p.value;
      hi = any ? std::max(hi, *p.value) : *p.value;
      any = true;
    }
  }
  svg::Document doc(kWidth, kHeight, first.scenario + " " + first.metric + " over the runs",
                    {{"class", "chart"}, {"data-scenario", first.scenario},
                     {"data-metric", first.metric}});
  if (!any) {
    doc.text(kWidth / 2, kHeight / 2, "nothing measured", text_style(kFont, "middle", kMuted));
    return doc.finish();
  }
  // Counts from 0 unless they sit far above it; times from near their smallest.
  const double from = first.kind == MetricKind::Count && lo <= 0.25 * hi ? 0 : lo;
  const std::vector<double> ticks = svg::linear_ticks(std::min(from, lo), hi, 5);
  const double left = 78, right = kWidth - 16, top = 14, bottom = kHeight - 64;
  const svg::Scale ys = svg::Scale::linear(ticks.front(), ticks.back(), bottom, top);
  const double step = runs.size() > 1 ? (right - left) / static_cast<double>(runs.size() - 1) : 0;
  auto xs = [&](size_t i) { return runs.size() > 1 ? left + step * static_cast<double>(i) : (left + right) / 2; };

  for (double t : ticks) {
    doc.line(left, ys(t), right, ys(t), {{"stroke", kGrid}});
    doc.text(left - 6, ys(t) + 4, html::format_value(t, unit), text_style(kSmallFont, "end", kMuted));
  }
  // Commits on the x axis: every run's, thinned to about 40 labels.
  const size_t every = std::max<size_t>(1, (runs.size() + 39) / 40);
  for (size_t i = 0; i < runs.size(); ++i) {
    doc.line(xs(i), bottom, xs(i), bottom + 4, {{"stroke", kAxis}});
    if (i % every != 0 && i + 1 != runs.size()) continue;
    const std::string y = svg::coord(bottom + 10);
    doc.text(xs(i), bottom + 10, short_commit(runs[i].commit),
             with(text_style(kSmallFont, "end", kMuted),
                  {{"transform", "rotate(-45 " + svg::coord(xs(i)) + " " + y + ")"},
                   {"font-family", "monospace"}, {"data-commit", runs[i].commit}}),
             runs[i].commit + (runs[i].branch.empty() ? "" : " on " + runs[i].branch) + ", " +
                 runs[i].date);
  }
  doc.line(left, bottom, right, bottom, {{"stroke", kAxis}});
  doc.line(left, top, left, bottom, {{"stroke", kAxis}});

  for (size_t k = 0; k < lines.size(); ++k) {
    const Series& s = *lines[k];
    const std::string& color = html::category_color(k);
    // Change points first, under the lines: a dashed rule at the first run after the change.
    for (const Finding& f : *findings.at(&s)) {
      const double x = xs(x_of.at(f.run.id));
      doc.line(x, top, x, bottom,
               with({{"stroke", f.regression ? kRise : kFall}, {"stroke-width", "1.5"},
                     {"stroke-dasharray", "5 3"}},
                    {{"data-change", !f.regression ? "improvement"
                                     : f.persists && !f.within_one_build ? "regression"
                                                                         : "rise"},
                     {"data-variant", s.variant}, {"data-metric", s.metric},
                     {"data-commit", f.run.commit}, {"data-index", std::to_string(f.index)}}));
      doc.text(x + 3, top + 10 + 12 * static_cast<double>(k % 4),
               (f.regression ? "\u25B2 " : "\u25BC ") + short_commit(f.run.commit),
               text_style(kSmallFont, "start", f.regression ? kRise : kFall), describe(f));
    }
    std::vector<std::pair<double, double>> line;
    for (const Point& p : s.points) {
      if (p.value) line.emplace_back(xs(x_of.at(p.run.id)), ys(*p.value));
    }
    if (line.size() > 1) {
      doc.polyline(line, {{"stroke", color}, {"stroke-width", "1.5"}});
    }
    for (const Point& p : s.points) {
      if (!p.value) continue;
      doc.circle(xs(x_of.at(p.run.id)), ys(*p.value), 2.6,
                 {{"fill", color}, {"data-scenario", s.scenario}, {"data-variant", s.variant},
                  {"data-metric", s.metric}, {"data-commit", p.run.commit},
                  {"data-run", std::to_string(p.run.id)}, {"data-value", svg::exact(*p.value)}},
                 s.variant + ": " + html::format_value(*p.value, unit) + " at " +
                     short_commit(p.run.commit) + " (" + p.run.date + ")");
    }
  }
  return doc.finish();
}

std::string legend(const std::vector<const Series*>& lines) {
  std::string out = "<div class=\"legend\">";
  for (size_t k = 0; k < lines.size(); ++k) {
    out += "<span data-legend=\"" + escape(lines[k]->variant) +
           "\"><span class=\"swatch\" style=\"background:" + html::category_color(k) +
           "\"></span>" + escape(lines[k]->variant) + "</span>";
  }
  return out + "</div>\n";
}

}  // namespace

std::string show_html(const std::vector<Series>& series, size_t runs, const CheckOptions& options,
                      const std::string& source, const std::vector<Series>& machine) {
  const AllFindings all = all_findings(series, options, machine);
  FindingsOf findings;
  for (size_t i = 0; i < series.size(); ++i) findings[&series[i]] = &all.of_series[i];
  // scenario -> metric -> its series (one per variant), in the store's order.
  std::vector<std::string> scenarios;
  std::map<std::string, std::vector<std::string>> metrics;
  std::map<std::pair<std::string, std::string>, std::vector<const Series*>> by_metric;
  for (const Series& s : series) {
    if (std::find(scenarios.begin(), scenarios.end(), s.scenario) == scenarios.end()) {
      scenarios.push_back(s.scenario);
    }
    auto& list = by_metric[{s.scenario, s.metric}];
    if (list.empty()) metrics[s.scenario].push_back(s.metric);
    list.push_back(&s);
  }
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n"
      "<title>bench history</title>\n<style>" +
      std::string(html_page_style()) + "</style>\n</head>\n<body>\n<main>\n<h1>Benchmark history</h1>\n";
  out += "<p class=\"meta\">" + escape(source) + ": " + std::to_string(runs) + " runs, " +
         std::to_string(series.size()) +
         " series. Change points: counts at every change between consecutive runs; median step "
         "times by E-Divisive means with a Student t-test (Apache Otava's; p &lt;= " +
         svg::exact(options.change_points.max_pvalue) + ", window " +
         std::to_string(options.change_points.window) +
         "). A dashed rule marks the first run after a change: red a rise (a regression), green a "
         "fall.</p>\n<nav>";
  for (const std::string& s : scenarios) {
    out += "<a href=\"#scenario-" + escape(s) + "\">" + escape(s) + "</a>";
  }
  out += "</nav>\n";
  for (const std::string& scenario : scenarios) {
    out += "<section id=\"scenario-" + escape(scenario) + "\">\n<h2>" + escape(scenario) + "</h2>\n";
    std::vector<std::string> unchanged;
    for (const std::string& metric : metrics[scenario]) {
      const std::vector<const Series*>& lines = by_metric[{scenario, metric}];
      bool changed = lines.front()->kind == MetricKind::Time;
      for (const Series* s : lines) changed = changed || !findings.at(s)->empty();
      if (!changed) {
        unchanged.push_back(metric);
        continue;
      }
      out += "<figure><figcaption>" + escape(metric) + " (" + escape(lines.front()->unit) +
             ")</figcaption>\n" + legend(lines) + trend_chart(lines, findings) + "</figure>\n";
    }
    if (!unchanged.empty()) {
      out += "<details><summary>" + std::to_string(unchanged.size()) +
             " counts unchanged in every variant over all runs</summary>\n<p class=\"note\">";
      for (size_t i = 0; i < unchanged.size(); ++i) {
        out += (i ? ", " : "") + std::string("<code>") + escape(unchanged[i]) + "</code>";
      }
      out += "</p>\n</details>\n";
    }
    out += "</section>\n";
  }
  return out + "</main>\n</body>\n</html>\n";
}

}  // namespace harness::history
