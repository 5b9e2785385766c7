// bench history show as text and JSON (see show.h).
#include "harness/report/history/show.h"

#include <algorithm>
#include <sstream>

#include "harness/report/text/format.h"

namespace harness::history {
namespace {

std::string value_text(const std::optional<double>& value, const std::string& unit) {
  if (!value) return "null";
  return unit == "ns" ? format_duration_ns(*value) : format_number(*value);
}

}  // namespace

std::string show_text(const std::vector<Series>& series, size_t runs, const CheckOptions& options,
                      const std::vector<Series>& machine) {
  std::ostringstream out;
  out << "bench history: " << series.size() << " series over " << runs << " runs\n";
  std::string scenario;
  const AllFindings all = all_findings(series, options, machine);
  for (size_t i = 0; i < series.size(); ++i) {
    const Series& s = series[i];
    if (s.scenario != scenario) out << "\n" << s.scenario << "\n";
    scenario = s.scenario;
    std::optional<double> lo, hi;
    for (const Point& p : s.points) {
      if (!p.value) continue;
      lo = lo ? std::min(*lo, *p.value) : *p.value;
      hi = hi ? std::max(*hi, *p.value) : *p.value;
    }
    const std::vector<Finding>& changes = all.of_series[i];
    out << "  " << s.variant << " " << s.metric << ": " << s.points.size() << " runs, last "
        << value_text(s.points.empty() ? std::nullopt : s.points.back().value, s.unit);
    if (lo && *lo != *hi) out << ", range " << value_text(lo, s.unit) << " .. " << value_text(hi, s.unit);
    out << (changes.empty() ? ", no change\n" : "\n");
    for (const Finding& f : changes) {
      out << "    " << (f.regression ? "rise" : "fall") << " at run " << f.index + 1 << ": "
          << describe(f).substr(f.scenario.size() + f.variant.size() + f.metric.size() + 4)
          << (f.within_one_build ? " (within one build: the machine, not the code)" : "")
          << (f.regression && !f.within_one_build && !f.persists
                  ? " (not a regression: " + std::to_string(f.confirming_runs) + " of " +
                        std::to_string(f.runs_at_new_level) +
                        " runs at the new level that the machine does not explain)"
                  : "")
          << "\n";
    }
  }
  return out.str();
}

ReportJson show_json(const std::vector<Series>& series, size_t runs, const CheckOptions& options,
                     const std::vector<Series>& sites, const std::vector<Series>& machine) {
  const AllFindings all = all_findings(series, options, machine);
  ReportJson out;
  out["history_show_version"] = kHistoryShowVersion;
  out["runs"] = runs;
  out["change_points"] = {{"method", "e-divisive means with a Student t-test (apache-otava)"},
                          {"window", options.change_points.window},
                          {"max_pvalue", options.change_points.max_pvalue},
                          {"min_magnitude", options.change_points.min_magnitude},
                          {"fdr", options.fdr},
                          {"min_runs", options.min_runs},
                          {"since", options.since}};
  ReportJson list = ReportJson::array();
  for (size_t i = 0; i < series.size(); ++i) {
    const Series& s = series[i];
    ReportJson j;
    j["scenario"] = s.scenario;
    j["variant"] = s.variant;
    j["metric"] = s.metric;
    j["unit"] = s.unit;
    j["kind"] = to_string(s.kind);
    ReportJson points = ReportJson::array();
    for (const Point& p : s.points) {
      points.push_back({{"run", p.run.id},
                        {"commit", p.run.commit},
                        {"branch", p.run.branch},
                        {"date", p.run.date},
                        {"value", value_json(p.value)}});
    }
    j["points"] = std::move(points);
    ReportJson changes = ReportJson::array();
    for (const Finding& f : all.of_series[i]) {
      changes.push_back({{"index", f.index},
                         {"commit", f.run.commit},
                         {"before", value_json(f.before)},
                         {"after", value_json(f.after)},
                         {"relative_change", value_json(f.relative_change())},
                         {"pvalue", f.pvalue ? value_json(*f.pvalue) : ReportJson()},
                         {"regression", f.regression},
                         {"recent", f.recent},
                         {"within_one_build", f.within_one_build},
                         {"runs_at_new_level", f.runs_at_new_level},
                         {"confirming_runs", f.confirming_runs},
                         {"persists", f.persists},
                         {"machine", f.machine},
                         {"sites", finding_sites(s, f, sites)}});
    }
    j["change_points"] = std::move(changes);
    list.push_back(std::move(j));
  }
  out["series"] = std::move(list);
  return out;
}

}  // namespace harness::history
