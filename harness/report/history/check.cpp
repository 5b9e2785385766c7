// Findings along the history's series (see check.h).
#include "harness/report/history/check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "harness/report/compare/site_diff.h"
#include "harness/report/compare/statistics.h"
#include "harness/report/history/significance.h"
#include "harness/report/history/store.h"
#include "harness/report/history/values.h"
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

// A time change point `p` whose new segment is `seg`, as a finding. The runs just before it of the
// commit of its first run decide whose it is: at the old level, the machine's (within one build);
// at the new level, E-Divisive placed it a little late, and it moves to that commit's first run.
Finding time_finding(const Series& series, const std::vector<size_t>& at,
                     const std::vector<double>& values, const ChangePoint& p, Segments seg,
                     const CheckOptions& options, const std::vector<Series>& machine) {
  auto commit_of = [&](size_t k) -> const std::string& { return series.points[at[k]].run.commit; };
  const std::string& commit = commit_of(seg.begin);
  size_t first = seg.begin;
  while (!commit.empty() && first > 0 && commit_of(first - 1) == commit) --first;
  bool within_one_build = false;
  if (first < seg.begin) {
    double sum = 0;
    for (size_t k = first; k < seg.begin; ++k) sum += values[k];
    const double earlier = sum / static_cast<double>(seg.begin - first);
    if (std::fabs(earlier - p.mean_before) <= std::fabs(earlier - p.mean_after)) {
      within_one_build = true;  // the same build, measured at both levels
    } else {
      seg.begin = first;
      seg.from = std::min(seg.from, first);
    }
  }
  Finding f = finding_at(series, at[seg.begin], p.mean_before, p.mean_after, options);
  f.within_one_build = within_one_build;
  const NewLevel level = judge_new_level(series, at, values, seg, machine);
  f.runs_at_new_level = level.runs;
  f.confirming_runs = level.confirming;
  f.machine = level.machine;
  f.persists = level.confirming >= options.min_runs;
  return f;
}

size_t time_change_count(const std::vector<std::vector<Finding>>& findings) {
  size_t n = 0;
  for (const std::vector<Finding>& list : findings) {
    for (const Finding& f : list) n += f.pvalue.has_value();
  }
  return n;
}

// Benjamini-Hochberg's cutoff over the p-values of every time series' change points; a time
// series without one counts as one test.
std::optional<double> correction_cutoff(const std::vector<Series>& series,
                                        const std::vector<std::vector<Finding>>& findings,
                                        double fdr) {
  std::vector<double> pvalues;
  size_t tests = 0;
  for (size_t i = 0; i < series.size(); ++i) {
    if (series[i].kind != MetricKind::Time) continue;
    size_t tested = 0;
    for (const Finding& f : findings[i]) {
      if (f.pvalue) pvalues.push_back(*f.pvalue), ++tested;
    }
    tests += std::max<size_t>(1, tested);
  }
  return benjamini_hochberg_cutoff(pvalues, tests, fdr);
}

// Whether a change point of `findings` is not kept at `cutoff`.
bool above(const std::vector<Finding>& findings, const std::optional<double>& cutoff) {
  for (const Finding& f : findings) {
    if (f.pvalue && (!cutoff || *f.pvalue > *cutoff)) return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> finding_sites(const Series& series, const Finding& finding,
                                       const std::vector<Series>& sites) {
  if (finding.kind != MetricKind::Count) return {};
  return changed_sites(series, finding, sites);
}

double Finding::relative_change() const { return before == 0 ? 0 : after / before - 1; }

std::vector<Finding> series_findings(const Series& series, const CheckOptions& options,
                                     const std::vector<Series>& machine) {
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
  const std::vector<ChangePoint> points = find_change_points(values, options.change_points);
  for (size_t j = 0; j < points.size(); ++j) {
    const ChangePoint& p = points[j];
    const Segments segments{j == 0 ? 0 : points[j - 1].index, p.index,
                            j + 1 == points.size() ? values.size() : points[j + 1].index};
    out.push_back(time_finding(series, at, values, p, segments, options, machine));
    if (!std::isnan(p.pvalue)) out.back().pvalue = p.pvalue;
  }
  return out;
}

AllFindings all_findings(const std::vector<Series>& series, const CheckOptions& options,
                         const std::vector<Series>& machine) {
  AllFindings out;
  std::vector<CheckOptions> of_series(series.size(), options);
  for (size_t i = 0; i < series.size(); ++i) {
    out.of_series.push_back(series_findings(series[i], options, machine));
  }
  const size_t found = time_change_count(out.of_series);
  // A series with a change point above the cutoff is checked again at the cutoff, so that
  // Otava's merge re-tests its neighbours; its new p-values then join the next round.
  for (int round = 0; round < 8; ++round) {
    const std::optional<double> cutoff = correction_cutoff(series, out.of_series, options.fdr);
    bool again = false;
    for (size_t i = 0; i < series.size(); ++i) {
      if (!above(out.of_series[i], cutoff)) continue;
      again = true;
      if (!cutoff) {
        out.of_series[i].clear();
        continue;
      }
      of_series[i].change_points.max_pvalue = std::nextafter(*cutoff, 1.0);
      out.of_series[i] = series_findings(series[i], of_series[i], machine);
    }
    if (!again) break;
  }
  out.dropped = found - std::min(found, time_change_count(out.of_series));
  return out;
}

bool CheckResult::failed() const {
  for (const Finding& f : findings) {
    if (f.fails()) return true;
  }
  return false;
}

CheckResult check_history(const std::vector<Series>& series, size_t runs,
                          const CheckOptions& options, const std::vector<Series>& sites,
                          const std::vector<Series>& machine) {
  CheckResult out;
  out.runs = runs;
  AllFindings all = all_findings(series, options, machine);
  out.time_changes_dropped = all.dropped;
  for (size_t i = 0; i < series.size(); ++i) {
    ++out.series_checked;
    for (Finding& f : all.of_series[i]) {
      f.sites = finding_sites(series[i], f, sites);
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
  out << " from commit " << escaped(f.run.commit.substr(0, 12));
  if (!f.run.branch.empty()) out << " on " << escaped(f.run.branch);
  out << " (" << f.run.date << ")";
  if (f.pvalue) out << ", p = " << format_p_value(*f.pvalue);
  return out.str();
}

namespace {

// A rise of a time that too few runs at the new level show, net of the machine.
std::string not_persisting(const Finding& f, const CheckOptions& options) {
  std::ostringstream out;
  out << "  slower " << describe(f) << ": ";
  if (f.machine.empty()) {
    out << "only " << f.runs_at_new_level << " run" << (f.runs_at_new_level == 1 ? "" : "s")
        << " at the new level, and a step-time regression needs " << options.min_runs
        << " (--min-runs): not a regression yet\n";
    return out.str();
  }
  out << "the machine explains " << f.machine.size() << " of the " << f.runs_at_new_level
      << " run" << (f.runs_at_new_level == 1 ? "" : "s") << " at the new level, and a step-time "
      << "regression needs " << options.min_runs << " it does not (--min-runs): not a regression\n";
  constexpr size_t kShown = 3;
  for (size_t i = 0; i < f.machine.size() && i < kShown; ++i) out << "      " << f.machine[i] << "\n";
  if (f.machine.size() > kShown) out << "      (and " << f.machine.size() - kShown << " more)\n";
  return out.str();
}

}  // namespace

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
  if (result.time_changes_dropped > 0) {
    out << "(" << result.time_changes_dropped << " step-time change"
        << (result.time_changes_dropped == 1 ? "" : "s")
        << " significant in a series left out: not significant over all series of the check, "
           "Benjamini-Hochberg at --fdr "
        << format_number(options.fdr) << ")\n";
  }
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
      if (f.regression && !f.persists) {
        out << not_persisting(f, options);
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
