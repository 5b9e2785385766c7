// One scenario's section of the HTML report: report values -> chart models (html_charts.h) and
// tables. Every value comes from the report through find_metric / find_samples / phase_per_step;
// nothing is recomputed another way.
#include "harness/report/html/html_scenario.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <optional>

#include "harness/report/text/format.h"
#include "harness/report/html/html_charts.h"

namespace harness::html {
namespace {

using svg::escape;
using svg::exact;

constexpr double kHalfWidth = 620;  // a chart in one of two columns
constexpr double kFullWidth = 1270;
const char* const kHeadColor = "#4e79a7";
const char* const kBaseColor = "#f28e2b";
const char* const kNotMeasured = "not measured";

// The "tensors" axis of a scaling variant (with an "impl" axis too), else empty.
std::optional<double> tensors_of(const VariantResult& v) {
  auto tensors = v.axes.find("tensors");
  if (tensors == v.axes.end() || v.axes.count("impl") == 0) return std::nullopt;
  char* end = nullptr;
  const double n = std::strtod(tensors->second.c_str(), &end);
  if (end == tensors->second.c_str() || *end != '\0' || !(n > 0)) return std::nullopt;
  return n;
}

// Variants the per-variant charts show: not scaling points, not per-rank copies of a merged one.
bool charted(const VariantResult& v) { return !tensors_of(v) && v.axes.count("rank") == 0; }

std::optional<double> value_of(const VariantResult& v, const std::string& path) {
  const Measurement* m = find_metric(v, path);
  return m != nullptr ? m->value : std::nullopt;
}

std::string failure_note(const VariantResult& v) {
  return (v.failed_as_expected() ? "expected failure: " : "FAILED: ") + v.error;
}

// One row of a per-variant chart: a variant of one side, or why it has none.
struct RowSource {
  std::string label;  // the variant on the first row of its group, else ""
  std::string variant;
  std::string side;  // "base" or "head"
  bool shown_side = false;
  const VariantResult* result = nullptr;
  std::string note;
};

std::vector<RowSource> row_sources(const ScenarioResult& head, const ScenarioResult* base,
                                   bool paired, bool (*wanted)(const VariantResult&)) {
  std::vector<std::string> names;
  for (const ScenarioResult* s : {&head, base}) {
    if (s == nullptr) continue;
    for (const VariantResult& v : s->variants) {
      if (wanted(v) && std::find(names.begin(), names.end(), v.name) == names.end()) {
        names.push_back(v.name);
      }
    }
  }
  std::vector<RowSource> rows;
  for (const std::string& name : names) {
    if (paired) {
      const VariantResult* b = base ? find_variant(*base, name) : nullptr;
      rows.push_back({name, name, "base", true, b, b ? "" : "not in base"});
    }
    const VariantResult* h = find_variant(head, name);
    rows.push_back({paired ? "" : name, name, "head", paired, h, h ? "" : "not in head"});
  }
  for (RowSource& r : rows) {
    if (r.result && !r.result->ran) r.note = failure_note(*r.result);
  }
  return rows;
}

std::string who(const RowSource& row) {
  return row.variant + (row.shown_side ? " (" + row.side + ")" : "");
}

svg::Attributes mark_data(const std::string& scenario, const RowSource& row,
                          const std::string& metric, double value) {
  return {{"data-scenario", scenario},
          {"data-variant", row.variant},
          {"data-side", row.side},
          {"data-metric", metric},
          {"data-value", exact(value)}};
}

// --- counts per step, by phase ----------------------------------------------------------------

struct CountMetric {
  const char* key;
  const char* caption;        // of the per-step chart
  const char* apart_caption;  // of the chart of phases counted apart from the steps
  const char* noun;
  std::vector<std::string> names;
};

const std::vector<CountMetric>& count_metrics() {
  static const std::vector<CountMetric> metrics = {
      {"launches",
       "Launches per step",
       "Launches apart from the steps",
       "launches",
       {"launch.count"}},
      {"copies",
       "Copies per step (H2D + D2H + D2D)",
       "Copies apart from the steps (H2D + D2H + D2D)",
       "copies",
       {"h2d.count", "d2h.count", "d2d.count"}},
      {"syncs",
       "Host-device syncs per step",
       "Host-device syncs apart from the steps",
       "syncs",
       {"sync.count"}},
      {"collectives",
       "Collectives per step",
       "Collectives apart from the steps",
       "collectives",
       {"collective.count"}},
  };
  return metrics;
}

// "a.x+a.y": the metric paths a mark's value sums.
std::string paths(const std::string& prefix, const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : "+") + prefix + n;
  return out;
}

std::optional<double> sum_of(const VariantResult& v, const std::string& prefix,
                             const std::vector<std::string>& names) {
  double sum = 0;
  for (const std::string& n : names) {
    const std::optional<double> value = value_of(v, prefix + n);
    if (!value) return std::nullopt;
    sum += *value;
  }
  return sum;
}

// "H2D 0, D2H 100, D2D 0": the counts a sum of several adds up; "" for a single count.
std::string parts(const VariantResult& v, const std::string& prefix,
                  const std::vector<std::string>& names) {
  if (names.size() < 2) return "";
  std::string out;
  for (const std::string& n : names) {
    std::string kind = n.substr(0, n.find('.'));
    for (char& c : kind) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    const std::optional<double> value = value_of(v, prefix + n);
    out += (out.empty() ? "" : ", ") + kind + " " + (value ? format_number(*value) : "-");
  }
  return out;
}

// Whether a phase's counts belong to the measured steps. A phase of the steps has its host time
// per measured step (phase[<p>].time.*); one counted apart from them (a set-up, an evaluation
// pass: scenarios' count_apart) has none, and its counts are not in total or per_step. Reports
// without phase times (before they existed) have every phase in the steps.
bool in_steps(const VariantResult& v, const std::string& phase) {
  const bool timed = std::any_of(v.phases.begin(), v.phases.end(), [&](const auto& p) {
    return value_of(v, "phase[" + p.first + "].time.median").has_value();
  });
  return !timed || value_of(v, "phase[" + phase + "].time.median").has_value();
}

// Phases with a count in some charted variant, in the steps or apart from them, sorted.
std::vector<std::string> counted_phases(const std::vector<RowSource>& rows, bool apart) {
  std::vector<std::string> phases;
  for (const RowSource& r : rows) {
    if (!r.result || !r.result->ran) continue;
    for (const auto& [phase, values] : r.result->phases) {
      if (in_steps(*r.result, phase) == apart) continue;
      for (const CountMetric& m : count_metrics()) {
        const std::optional<double> v = sum_of(*r.result, "phase[" + phase + "].", m.names);
        if (v && *v > 0 && std::find(phases.begin(), phases.end(), phase) == phases.end()) {
          phases.push_back(phase);
        }
      }
    }
  }
  std::sort(phases.begin(), phases.end());
  return phases;
}

// Each phase's colour, the same in every chart of the scenario.
using PhaseColors = std::map<std::string, std::string>;

// `apart`: the phases counted apart from the steps, each bar their window counts; else the
// phases of the steps, per step, each bar ending at the report's per-step value.
BarChart count_chart(const std::string& scenario, const CountMetric& metric,
                     const std::vector<RowSource>& rows, const std::vector<std::string>& phases,
                     const PhaseColors& colors, bool apart) {
  BarChart chart;
  chart.label =
      std::string(apart ? metric.apart_caption : metric.caption) + " in " + scenario + ", by phase";
  chart.axis_label = std::string(metric.noun) + (apart ? " in the measured window" : " per step");
  chart.data = {{"data-chart", apart ? "counts_apart" : "counts"},
                {"data-scenario", scenario},
                {"data-metric", metric.key}};
  for (const RowSource& row : rows) {
    BarRow bar{row.label,
               row.shown_side ? row.side : "",
               row.side == "base" && row.shown_side,
               {},
               std::nullopt,
               {},
               row.note};
    const VariantResult* v = row.result;
    const std::optional<double> total =
        v && v->ran ? sum_of(*v, "per_step.", metric.names) : std::nullopt;
    if (bar.note.empty() && !total) bar.note = kNotMeasured;
    if (!bar.note.empty()) {
      chart.rows.push_back(std::move(bar));
      continue;
    }
    if (!apart) {
      const std::string split = parts(*v, "per_step.", metric.names);
      bar.total = total;
      bar.total_mark = {who(row) + ": " + format_number(*total) + " " + metric.noun + " per step" +
                            (split.empty() ? "" : " (" + split + ")"),
                        mark_data(scenario, row, paths("per_step.", metric.names), *total)};
    }
    double apart_sum = 0;
    for (const std::string& phase : phases) {
      const std::string prefix = "phase[" + phase + "].";
      const std::optional<double> window = sum_of(*v, prefix, metric.names);
      if (!window || *window <= 0 || in_steps(*v, phase) == apart) continue;
      const std::string in_window = parts(*v, prefix, metric.names);
      Mark mark;
      double value = *window;
      if (apart) {
        mark = {who(row) + ", " + phase + ": " + format_number(*window) + " " + metric.noun +
                    " in the measured window, apart from the steps" +
                    (in_window.empty() ? "" : " (" + in_window + ")"),
                mark_data(scenario, row, paths(prefix, metric.names), *window)};
        apart_sum += *window;
      } else {
        const std::optional<double> per_step = phase_per_step(*v, phase, metric.names);
        if (!per_step) continue;  // no measured step
        value = *per_step;
        const std::optional<double> time = value_of(*v, prefix + "time.median");
        mark = {who(row) + ", " + phase + ": " + format_number(value) + " " + metric.noun +
                    " per step (" + format_number(*window) + " in " +
                    std::to_string(v->measured_steps) + " steps" +
                    (in_window.empty() ? "" : ": " + in_window) + ")" +
                    (time ? "; phase time, median: " + format_duration_ns(*time) : ""),
                mark_data(scenario, row, paths(prefix, metric.names), value)};
        mark.data.emplace_back("data-window", exact(*window));
        mark.data.emplace_back("data-steps", std::to_string(v->measured_steps));
      }
      mark.data.emplace_back("data-phase", phase);
      bar.segments.push_back({value, colors.at(phase), std::move(mark)});
    }
    if (apart) {  // the sum of the segments: the report has no total of these phases
      bar.total = apart_sum;
      bar.total_mark.title = who(row) + ": " + format_number(apart_sum) + " " + metric.noun +
                             " in the phases counted apart";
    }
    chart.rows.push_back(std::move(bar));
  }
  return chart;
}

std::string figure(const std::string& caption, const std::string& svg_text) {
  return "<figure><figcaption>" + escape(caption) + "</figcaption>\n" + svg_text + "</figure>\n";
}

std::string legend(const std::vector<std::string>& phases, const PhaseColors& colors) {
  std::string out = "<div class=\"legend\">";
  for (const std::string& phase : phases) {
    out += "<span data-legend=\"" + escape(phase) +
           "\"><span class=\"swatch\" style=\"background:" + colors.at(phase) + "\"></span>" +
           escape(phase) + "</span>";
  }
  if (phases.empty()) out += "<span>no launches, copies, syncs or collectives in any phase</span>";
  return out + "</div>\n";
}

std::string count_charts(const std::string& scenario, const std::vector<RowSource>& rows,
                         const std::vector<std::string>& phases, const PhaseColors& colors,
                         bool paired, bool apart) {
  std::string out = "<div class=\"grid\">\n";
  for (const CountMetric& m : count_metrics()) {
    const BarChart chart = count_chart(scenario, m, rows, phases, colors, apart);
    // A chart of zeros (besides variants that failed) says less than a line does.
    const bool zeros =
        std::all_of(
            chart.rows.begin(), chart.rows.end(),
            [](const BarRow& r) { return r.total ? *r.total == 0 : r.note != kNotMeasured; }) &&
        std::any_of(chart.rows.begin(), chart.rows.end(), [](const BarRow& r) { return r.total; });
    const bool drawn = std::any_of(chart.rows.begin(), chart.rows.end(),
                                   [](const BarRow& r) { return !r.segments.empty(); });
    if (apart && !drawn) continue;  // none of these phases has such counts
    if (!zeros) {
      out += figure(apart ? m.apart_caption : m.caption, stacked_bar_chart(chart, kHalfWidth));
    } else if (!apart) {
      out += "<figure data-chart=\"counts\" data-metric=\"" + std::string(m.key) +
             "\" data-all-zero=\"true\"><figcaption>" + escape(m.caption) +
             "</figcaption>\n<p class=\"note\">0 " + m.noun + " per step in every variant" +
             (paired ? " of both runs" : "") + ".</p></figure>\n";
    }
  }
  return out + "</div>\n";
}

std::string counts_block(const std::string& scenario, const std::vector<RowSource>& rows,
                         bool paired) {
  const std::vector<std::string> steps = counted_phases(rows, false);
  const std::vector<std::string> apart = counted_phases(rows, true);
  std::vector<std::string> all = steps;
  all.insert(all.end(), apart.begin(), apart.end());
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  PhaseColors colors;
  for (size_t i = 0; i < all.size(); ++i) colors[all[i]] = category_color(i);

  std::string out = "<h3>Counts per step, by phase</h3>\n<p class=\"note\">One bar per variant" +
                    std::string(paired ? " and side (base lighter, above head)" : "") +
                    ": what a measured step costs, stacked by the innermost phase each event "
                    "happened in (hover a segment for its exact value and the phase's time). "
                    "Shorter is better.</p>\n" +
                    legend(steps, colors) +
                    count_charts(scenario, rows, steps, colors, paired, false);
  if (!apart.empty()) {
    out +=
        "<h3>Counted apart from the steps, by phase</h3>\n<p class=\"note\">What the "
        "scenario measured besides its steps (set-ups, evaluation passes): each phase's counts "
        "in the measured window, not per step; they are not in the per-step bars above.</p>\n" +
        legend(apart, colors) + count_charts(scenario, rows, apart, colors, paired, true);
  }
  return out;
}

// --- scaling -------------------------------------------------------------------------------------

// What a scaling variant has besides impl and tensors ("numel=256"): one pair of charts each.
std::string scaling_group(const VariantResult& v) {
  std::string out;
  for (const auto& [axis, value] : v.axes) {
    if (axis != "impl" && axis != "tensors") out += (out.empty() ? "" : ", ") + axis + "=" + value;
  }
  return out;
}

bool scaling(const VariantResult& v) { return tensors_of(v).has_value(); }

std::string scaling_block(const ScenarioResult& head, const ScenarioResult* base, bool paired) {
  std::vector<std::string> groups, impls;
  std::vector<std::pair<const ScenarioResult*, const char*>> sides;
  if (paired && base) sides.emplace_back(base, "base");
  sides.emplace_back(&head, "head");
  for (const auto& [s, side] : sides) {
    for (const VariantResult& v : s->variants) {
      if (!scaling(v)) continue;
      const std::string g = scaling_group(v), impl = v.axes.at("impl");
      if (std::find(groups.begin(), groups.end(), g) == groups.end()) groups.push_back(g);
      if (std::find(impls.begin(), impls.end(), impl) == impls.end()) impls.push_back(impl);
    }
  }
  if (groups.empty()) return "";
  std::string out =
      "<h3>Scaling with the number of parameter tensors</h3>\n<p class=\"note\">Each line is one "
      "implementation (variants with <code>impl</code> and <code>tensors</code> axes), both axes "
      "log10; step time is the median, with every measured step as a faint dot" +
      std::string(paired ? "; base dashed with hollow points, head solid" : "") + ".</p>\n";
  std::vector<std::string> failed;
  for (const std::string& group : groups) {
    LineChart launches, time;
    const std::string suffix = group.empty() ? "" : " (" + group + ")";
    launches.label = "Launches per step against parameter tensors in " + head.name + suffix;
    launches.x_label = time.x_label = "parameter tensors";
    launches.y_label = "launches per step";
    launches.data = {{"data-chart", "scaling"},
                     {"data-scenario", head.name},
                     {"data-metric", "per_step.launch.count"},
                     {"data-group", group}};
    time.label = "Step time against parameter tensors in " + head.name + suffix;
    time.y_label = "step time";
    time.y_unit = Unit::Nanoseconds;
    time.data = {{"data-chart", "scaling"},
                 {"data-scenario", head.name},
                 {"data-metric", "timing.step_time.median"},
                 {"data-group", group}};
    for (const auto& [s, side] : sides) {
      for (size_t i = 0; i < impls.size(); ++i) {
        const std::string name = impls[i] + (paired ? std::string(" (") + side + ")" : "");
        Series ls{name, category_color(i), paired && side == std::string("base"), {}, {}};
        Series ts = ls;
        for (const VariantResult& v : s->variants) {
          if (!scaling(v) || v.axes.at("impl") != impls[i] || scaling_group(v) != group) continue;
          const RowSource row{v.name, v.name, side, paired, &v, ""};
          if (!v.ran) {
            failed.push_back(who(row) + ": " + failure_note(v));
            continue;
          }
          const double x = *tensors_of(v);
          const std::string tensors = " at " + format_number(x) + " tensors";
          auto point = [&](double y, const std::string& metric, const std::string& title) {
            Point p{x, y, {title, mark_data(head.name, row, metric, y)}};
            p.mark.data.emplace_back("data-x", exact(x));
            return p;
          };
          if (auto n = value_of(v, "per_step.launch.count")) {
            ls.points.push_back(
                point(*n, "per_step.launch.count",
                      who(row) + ": " + format_number(*n) + " launches per step" + tensors));
          }
          if (auto median = value_of(v, "timing.step_time.median")) {
            ts.points.push_back(point(*median, "timing.step_time.median",
                                      who(row) + ": median step " + format_duration_ns(*median) +
                                          " (" + exact(*median) + " ns)" + tensors));
          }
          if (const std::vector<double>* samples = find_samples(v, "samples.step_time")) {
            for (size_t k = 0; k < samples->size(); ++k) {
              Point p = point((*samples)[k], "samples.step_time",
                              who(row) + ", step " + std::to_string(k + 1) + ": " +
                                  format_duration_ns((*samples)[k]) + " (" + exact((*samples)[k]) +
                                  " ns)");
              p.mark.data.emplace_back("data-index", std::to_string(k));
              ts.dots.push_back(std::move(p));
            }
          }
        }
        launches.series.push_back(std::move(ls));
        time.series.push_back(std::move(ts));
      }
    }
    out += "<div class=\"grid\">\n" +
           figure("Launches per step against parameter tensors" + suffix,
                  log_log_chart(launches, kHalfWidth, 340)) +
           figure("Step time against parameter tensors" + suffix,
                  log_log_chart(time, kHalfWidth, 340)) +
           "</div>\n";
  }
  for (const std::string& f : failed) out += "<p class=\"note failed\">" + escape(f) + "</p>\n";
  return out;
}

// --- step times ----------------------------------------------------------------------------------

std::string step_time_block(const std::string& scenario, const std::vector<RowSource>& rows,
                            bool paired) {
  StripChart chart;
  chart.label = "Measured step times of each variant in " + scenario;
  chart.axis_label = "step time (wall clock)";
  chart.data = {{"data-chart", "step_time"},
                {"data-scenario", scenario},
                {"data-metric", "samples.step_time"}};
  bool any = false;
  for (const RowSource& row : rows) {
    StripRow strip{row.label,
                   row.shown_side ? row.side : "",
                   row.side == "base" && row.shown_side,
                   row.side == "base" ? kBaseColor : kHeadColor,
                   {},
                   std::nullopt,
                   std::nullopt,
                   std::nullopt,
                   row.note};
    if (const VariantResult* v = row.note.empty() ? row.result : nullptr) {
      if (const std::vector<double>* samples = find_samples(*v, "samples.step_time")) {
        for (size_t k = 0; k < samples->size(); ++k) {
          const double t = (*samples)[k];
          Point p{t,
                  0,
                  {who(row) + ", step " + std::to_string(k + 1) + ": " + format_duration_ns(t) +
                       " (" + exact(t) + " ns)",
                   mark_data(scenario, row, "samples.step_time", t)}};
          p.mark.data.emplace_back("data-index", std::to_string(k));
          strip.samples.push_back(std::move(p));
        }
      }
      if (auto median = value_of(*v, "timing.step_time.median")) {
        strip.median = Point{
            *median,
            0,
            {who(row) + ": median " + format_duration_ns(*median) + " (" + exact(*median) + " ns)",
             mark_data(scenario, row, "timing.step_time.median", *median)}};
      }
      strip.min = value_of(*v, "timing.step_time.min");
      strip.max = value_of(*v, "timing.step_time.max");
      if (strip.samples.empty() && !strip.median) strip.note = "no step times";
      any = any || !strip.samples.empty();
    }
    chart.rows.push_back(std::move(strip));
  }
  if (!any) return "";
  return "<h3>Step time, every measured step</h3>\n<p class=\"note\">A dot per measured step " +
         std::string(paired ? "(base orange, head blue) " : "") +
         "on one axis for all variants; the black tick is the median, the grey line runs from the "
         "fastest to the slowest step.</p>\n" +
         figure("Step time distribution", strip_chart(chart, kFullWidth));
}

// --- memory
// ----------------------------------------------------------------------------------------

std::string memory_block(const std::string& scenario, const std::vector<RowSource>& rows) {
  const std::pair<const char*, const char*> metrics[] = {
      {"memory.peak_bytes", "Peak device memory"}, {"host_memory.peak_bytes", "Peak host memory"}};
  std::string out;
  for (const auto& [metric, caption] : metrics) {
    std::vector<std::string> phases;
    bool any = false;
    for (const RowSource& r : rows) {
      if (!r.result || !r.result->ran) continue;
      any = any || value_of(*r.result, std::string("total.") + metric);
      for (const auto& [phase, values] : r.result->phases) {
        if (!value_of(*r.result, "phase[" + phase + "]." + metric)) continue;
        any = true;
        if (std::find(phases.begin(), phases.end(), phase) == phases.end()) phases.push_back(phase);
      }
    }
    if (!any) continue;
    std::sort(phases.begin(), phases.end());
    Heatmap chart;
    chart.label = std::string(caption) + " by phase in " + scenario;
    chart.columns = {"whole window"};
    chart.columns.insert(chart.columns.end(), phases.begin(), phases.end());
    chart.data = {{"data-chart", "memory"}, {"data-scenario", scenario}, {"data-metric", metric}};
    for (const RowSource& r : rows) {
      HeatRow row{r.label, r.shown_side ? r.side : "", {}};
      for (size_t j = 0; j < chart.columns.size(); ++j) {
        const std::string path =
            j == 0 ? std::string("total.") + metric : "phase[" + phases[j - 1] + "]." + metric;
        HeatCell cell;
        const Measurement* m = r.result && r.result->ran ? find_metric(*r.result, path) : nullptr;
        cell.present = m != nullptr;
        if (m != nullptr) {
          cell.value = m->value;
          cell.mark.title =
              who(r) + ", " + chart.columns[j] + ": " +
              (m->value ? format_value(*m->value, Unit::Bytes) + " (" + exact(*m->value) + " bytes)"
                        : "not measured");
          cell.mark.data = mark_data(scenario, r, path, m->value.value_or(0));
          if (!m->value) cell.mark.data.back() = {"data-value", ""};  // not measured
        }
        row.cells.push_back(std::move(cell));
      }
      chart.rows.push_back(std::move(row));
    }
    out += figure(caption, heatmap(chart, kFullWidth));
  }
  if (out.empty()) return "";
  return "<h3>Memory by phase</h3>\n<p class=\"note\">The most memory held at once while each "
         "phase was open (nested phases included), and over the whole measured window; shaded "
         "from the chart's smallest value (lightest) to its largest (darkest).</p>\n" +
         out;
}

// --- tables
// ----------------------------------------------------------------------------------------

// 'r' for the columns whose cells are all numbers (as the console aligns them), else 'l'.
std::string numeric_columns(const ResultTable& t) {
  std::string alignment;
  for (size_t c = 0; c < t.columns.size(); ++c) {
    const bool numeric = !t.rows.empty() && std::all_of(t.rows.begin(), t.rows.end(), [&](auto& r) {
      char* end = nullptr;
      if (c >= r.size() || r[c].empty()) return false;
      std::strtod(r[c].c_str(), &end);
      return *end == '\0';
    });
    alignment += numeric ? 'r' : 'l';
  }
  return alignment;
}

std::string tables_block(const ScenarioResult& s) {
  std::vector<std::vector<std::string>> rows;
  for (const VariantResult& v : s.variants) rows.push_back(variant_summary_cells(v));
  std::string out = html_table(variant_summary_header(), rows, variant_summary_alignment());
  for (const ResultTable& t : s.tables) {
    out += "<h4>" + escape(t.title) + "</h4>\n" + html_table(t.columns, t.rows, numeric_columns(t));
  }
  const SiteTable syncs = sync_site_table(s);
  if (!syncs.rows.empty()) {
    out += "<h4>Sync sites (count and host time waited in the measured window)</h4>\n" +
           html_table(syncs.header, syncs.rows, kSiteTableAlignment);
  }
  const SiteTable copies = copy_site_table(s);
  if (!copies.rows.empty()) {
    out += "<h4>Copy sites (blocking or pageable H2D / D2H copies in the measured window)</h4>\n" +
           html_table(copies.header, copies.rows, kSiteTableAlignment);
  }
  const SiteTable events = event_site_table(s);
  if (!events.rows.empty()) {
    out += "<h4>Graph breaks, recompilations and capture blockers in the measured window</h4>\n" +
           html_table(events.header, events.rows, kEventSiteTableAlignment);
  }
  for (const VariantResult& v : s.variants) {
    for (const std::string& w : v.warnings) {
      out += "<p class=\"warning\">" + escape(v.name) + ": " + escape(w) + "</p>\n";
    }
  }
  return out;
}

}  // namespace

std::string html_table(const std::vector<std::string>& header,
                       const std::vector<std::vector<std::string>>& rows,
                       const std::string& alignment) {
  auto cell = [&](const char* tag, size_t i, const std::string& text) {
    const bool right = i < alignment.size() && alignment[i] == 'r';
    return std::string("<") + tag + (right ? " class=\"r\"" : "") + ">" + escape(text) + "</" +
           tag + ">";
  };
  std::string out = "<table>\n<thead><tr>";
  for (size_t i = 0; i < header.size(); ++i) out += cell("th", i, header[i]);
  out += "</tr></thead>\n<tbody>\n";
  for (const auto& row : rows) {
    out += "<tr>";
    for (size_t i = 0; i < row.size(); ++i) {
      // A row shorter than the header (a failed variant) spans the rest.
      if (i + 1 == row.size() && row.size() < header.size()) {
        out +=
            "<td colspan=\"" + std::to_string(header.size() - i) + "\">" + escape(row[i]) + "</td>";
      } else {
        out += cell("td", i, row[i]);
      }
    }
    out += "</tr>\n";
  }
  return out + "</tbody>\n</table>\n";
}

std::string scenario_section(const ScenarioResult& head, const ScenarioResult* base, bool paired) {
  std::string out = "<section class=\"scenario\" id=\"scenario-" + escape(head.name) +
                    "\" data-scenario=\"" + escape(head.name) + "\">\n<h2>" + escape(head.name) +
                    "</h2>\n";
  if (!head.description.empty()) out += "<p>" + escape(head.description) + "</p>\n";
  std::string meta;
  if (!head.measured_window.empty())
    meta += "Measured window: " + escape(head.measured_window) + ". ";
  if (head.world_size > 1) {
    meta += "Ranks: " + std::to_string(head.world_size) + " (each variant summed over them). ";
  }
  if (!head.config.empty()) {
    meta += "Config:";
    for (const auto& [key, value] : head.config)
      meta += " <code>" + escape(key + "=" + value) + "</code>";
  }
  if (!meta.empty()) out += "<p class=\"meta\">" + meta + "</p>\n";
  if (paired && base == nullptr) out += "<p class=\"warning\">Not in the base report.</p>\n";
  const std::vector<RowSource> rows = row_sources(head, base, paired, charted);
  if (!rows.empty()) out += counts_block(head.name, rows, paired);
  out += scaling_block(head, base, paired);
  if (!rows.empty()) {
    out += step_time_block(head.name, rows, paired);
    out += memory_block(head.name, rows);
  }
  out += "<h3>Variants" + std::string(paired ? " (head)" : "") + "</h3>\n" + tables_block(head);
  if (paired && base != nullptr) {
    out += "<details><summary>Variants (base)</summary>\n" + tables_block(*base) + "</details>\n";
  }
  return out + "</section>\n";
}

}  // namespace harness::html
