// Findings along the history's series (see check.h).
#include "harness/report/history/check.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "harness/report/compare/site_diff.h"
#include "harness/report/compare/statistics.h"
#include "harness/report/history/store.h"
#include "harness/report/text/format.h"

namespace harness::history {
namespace {

constexpr double kCountTolerance = 1e-9;  // per-step divisions round

Finding finding_at(const Series& series, size_t index, double before, double after,
                   const CheckOptions& options) {
  Finding f;
  f.scenario = series.scenario;
  f.variant = series.variant;
  f.metric = series.metric;
  f.unit = series.unit;
  f.kind = series.kind;
  f.index = index;
  f.run = series.points[index].run;
  f.before = before;
  f.after = after;
  f.regression = after > before;
  f.recent = index + options.since >= series.points.size();
  return f;
}

std::string number(double value, const std::string& unit) {
  if (unit == "ns") return format_duration_ns(value);
  return format_number(value);
}

std::string percent(double change) {
  char out[32];
  std::snprintf(out, sizeof out, "%+.1f%%", change * 100);
  return out;
}

// A site's series name, back to its fields (store.h, kSiteSeriesPrefix).
struct SiteName {
  bool sync = true;
  std::string phase, what, frame, library, allowed;
};

std::optional<SiteName> parse_site_name(const std::string& metric) {
  std::vector<std::string> fields;
  size_t begin = 0;
  for (size_t tab; (tab = metric.find('\t', begin)) != std::string::npos; begin = tab + 1) {
    fields.push_back(metric.substr(begin, tab - begin));
  }
  fields.push_back(metric.substr(begin));
  if (fields.size() < 5) return std::nullopt;
  SiteName n;
  n.sync = fields[0] == std::string(kSiteSeriesPrefix) + "sync";
  n.phase = fields[1];
  n.what = fields[2];
  n.frame = fields[3];
  n.library = fields[4];
  if (fields.size() > 5) n.allowed = fields[5];
  return n;
}

// Which kind of site a count metric is made of: "sync", "H2D", "D2H"; "" for none.
std::string site_kind(const std::string& metric) {
  if (metric == "per_step.sync.count") return "sync";
  if (metric == "per_step.h2d.count") return "H2D";
  if (metric == "per_step.d2h.count") return "D2H";
  return "";
}

std::optional<double> value_in_run(const Series& s, int64_t run_id) {
  for (const Point& p : s.points) {
    if (p.run.id == run_id) return p.value.value_or(0);
  }
  return std::nullopt;
}

// The lines of `f`'s variant whose count per step changed between the run before the change and
// the run of it.
std::vector<std::string> changed_sites(const Series& series, const Finding& f,
                                       const std::vector<Series>& sites) {
  const std::string kind = site_kind(series.metric);
  if (kind.empty()) return {};
  int64_t before_run = -1;
  for (size_t i = f.index; i-- > 0;) {
    if (series.points[i].value) {
      before_run = series.points[i].run.id;
      break;
    }
  }
  std::vector<std::string> out;
  for (const Series& s : sites) {
    if (s.scenario != series.scenario || s.variant != series.variant) continue;
    const std::optional<SiteName> name = parse_site_name(s.metric);
    if (!name || name->sync != (kind == "sync")) continue;
    if (!name->sync && name->what.find(kind) == std::string::npos) continue;
    const double before = value_in_run(s, before_run).value_or(0);
    const double after = value_in_run(s, f.run.id).value_or(0);
    if (std::fabs(after - before) <= kCountTolerance * std::max(1.0, std::fabs(before))) continue;
    SiteChange c;
    c.kind = before == 0 ? SiteChange::Added : after == 0 ? SiteChange::Removed : SiteChange::Changed;
    c.sync = name->sync;
    c.phase = name->phase;
    c.what = name->what;
    c.frame = name->frame;
    c.library = name->library;
    c.allowed = name->allowed;
    c.base = before;
    c.head = after;
    out.push_back(describe(c));
  }
  return out;
}

}  // namespace

std::vector<std::string> finding_sites(const Series& series, const Finding& finding,
                                       const std::vector<Series>& sites) {
  if (finding.kind != MetricKind::Count) return {};
  return changed_sites(series, finding, sites);
}

double Finding::relative_change() const { return before == 0 ? 0 : after / before - 1; }

std::vector<Finding> series_findings(const Series& series, const CheckOptions& options) {
  std::vector<Finding> out;
  // Measured points only (a null is a run that did not measure it).
  std::vector<size_t> at;
  std::vector<double> values;
  for (size_t i = 0; i < series.points.size(); ++i) {
    if (series.points[i].value) {
      at.push_back(i);
      values.push_back(*series.points[i].value);
    }
  }
  if (series.kind == MetricKind::Count) {
    for (size_t k = 1; k < values.size(); ++k) {
      const double slack = kCountTolerance * std::max(1.0, std::fabs(values[k - 1]));
      if (std::fabs(values[k] - values[k - 1]) > slack) {
        out.push_back(finding_at(series, at[k], values[k - 1], values[k], options));
      }
    }
    return out;
  }
  auto commit_of = [&](size_t k) -> const std::string& { return series.points[at[k]].run.commit; };
  for (const ChangePoint& p : find_change_points(values, options.change_points)) {
    // The runs just before the change that are of the same commit as its first run.
    const std::string& commit = commit_of(p.index);
    size_t first = p.index;
    while (!commit.empty() && first > 0 && commit_of(first - 1) == commit) --first;
    size_t index = p.index;
    bool within_one_build = false;
    if (first < p.index) {
      double sum = 0;
      for (size_t k = first; k < p.index; ++k) sum += values[k];
      const double earlier = sum / static_cast<double>(p.index - first);
      if (std::fabs(earlier - p.mean_before) <= std::fabs(earlier - p.mean_after)) {
        within_one_build = true;  // the same build, measured at both levels
      } else {
        index = first;  // E-Divisive placed it a little late: the build's first run has it
      }
    }
    Finding f = finding_at(series, at[index], p.mean_before, p.mean_after, options);
    f.within_one_build = within_one_build;
    if (!std::isnan(p.pvalue)) f.pvalue = p.pvalue;
    out.push_back(std::move(f));
  }
  return out;
}

bool CheckResult::failed() const {
  for (const Finding& f : findings) {
    if (f.fails()) return true;
  }
  return false;
}

CheckResult check_history(const std::vector<Series>& series, size_t runs,
                          const CheckOptions& options, const std::vector<Series>& sites) {
  CheckResult out;
  out.runs = runs;
  for (const Series& s : series) {
    ++out.series_checked;
    for (Finding& f : series_findings(s, options)) {
      f.sites = finding_sites(s, f, sites);
      out.findings.push_back(std::move(f));
    }
  }
  return out;
}

std::string describe(const Finding& f) {
  std::ostringstream out;
  out << f.scenario << " " << f.variant << " " << f.metric << ": "
      << (f.kind == MetricKind::Time ? "mean " : "") << number(f.before, f.unit) << " -> "
      << number(f.after, f.unit);
  if (f.before != 0) out << " (" << percent(f.relative_change()) << ")";
  out << " from commit " << f.run.commit.substr(0, 12);
  if (!f.run.branch.empty()) out << " on " << f.run.branch;
  out << " (" << f.run.date << ")";
  if (f.pvalue) out << ", p = " << format_p_value(*f.pvalue);
  return out.str();
}

std::string check_text(const CheckResult& result, const CheckOptions& options) {
  std::ostringstream out;
  size_t failing = 0, recent = 0;
  for (const Finding& f : result.findings) {
    failing += f.fails();
    recent += f.recent;
  }
  out << "bench history check: " << result.series_checked << " series over " << result.runs
      << " runs; " << failing << " regression" << (failing == 1 ? "" : "s") << " in the newest "
      << options.since << " runs, " << result.findings.size() - recent << " earlier change"
      << (result.findings.size() - recent == 1 ? "" : "s") << "\n";
  for (const bool newest : {true, false}) {
    bool header = false;
    for (const Finding& f : result.findings) {
      if (f.recent != newest) continue;
      if (!header) out << (newest ? "New changes:\n" : "Earlier changes:\n");
      header = true;
      if (f.within_one_build) {
        out << "  " << (f.regression ? "slower " : "faster ") << describe(f)
            << ": within one build (its earlier runs are at the old level), so the machine "
               "changed, not the code: not a regression\n";
        continue;
      }
      out << "  " << (f.regression ? (newest ? "REGRESSION " : "regression ") : "improvement ")
          << describe(f) << "\n";
      for (const std::string& site : f.sites) out << "      " << site << "\n";
    }
  }
  return out.str();
}

}  // namespace harness::history
