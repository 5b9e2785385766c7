#pragma once
// bench history check: what changed along each series of the history, and whether the newest runs
// start a regression.
//   - Counts (exact): any change between consecutive runs is a finding, named with the first run
//     (commit) that has the new value.
//   - Times (each run's median step time): E-Divisive with a t-test (change_points.h). A shift
//     found between runs of one commit, where that commit's earlier runs sit at the old level, is
//     the machine's (load, another tenant), not the code's: reported as such, never failed. Where
//     that commit's earlier runs sit at the new level, the change is moved to its first run.
// Every metric the history keeps is better lower, so a rise is a regression. A regression fails the
// check when its first run is among the newest `since` runs of its series; older changes are
// listed, not failed (they were reported when they were new).
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "harness/report/history/change_points.h"
#include "harness/report/history/store.h"

namespace harness::history {

struct CheckOptions {
  size_t since = 5;  // a change starting in the newest `since` runs of its series is new
  ChangePointOptions change_points;
};

struct Finding {
  std::string scenario;
  std::string variant;
  std::string metric;
  std::string unit;
  MetricKind kind = MetricKind::Count;
  size_t index = 0;   // the first point (run) with the new level, in its series
  Run run;            // that run: its commit, branch and date
  double before = 0;  // the value (count) or mean (time) before and after
  double after = 0;
  std::optional<double> pvalue;  // times only
  bool regression = false;       // a rise
  bool recent = false;           // starts in the newest `since` runs
  bool within_one_build = false; // times: one commit measured at both levels (the machine)
  // Counts of syncs or copies: the lines whose count per step changed at the same run
  // ("+1 sync/step at train.py:42 in step (...)"), from the sites' series.
  std::vector<std::string> sites;

  double relative_change() const;  // after / before - 1 (0 when before is 0)
  bool fails() const { return regression && recent && !within_one_build; }
};

// The change points of one series, as findings (oldest first).
std::vector<Finding> series_findings(const Series& series, const CheckOptions& options);

// The lines of a count change's variant whose count per step changed at the same run, described
// as bench compare describes them; empty for a time, or a count not made of sites.
std::vector<std::string> finding_sites(const Series& series, const Finding& finding,
                                       const std::vector<Series>& sites);

struct CheckResult {
  size_t series_checked = 0;
  size_t runs = 0;
  std::vector<Finding> findings;  // by scenario, variant, metric, then index
  bool failed() const;
};

// `sites`: the sites' series (Store::series(filter, true)), to name the lines a change of
// per_step.sync.count, .h2d.count or .d2h.count came with; empty: none named.
CheckResult check_history(const std::vector<Series>& series, size_t runs,
                          const CheckOptions& options, const std::vector<Series>& sites = {});

// "resume_adam resume_move_all/foreach per_step.d2h.count: 20 -> 40 (+100%) from commit abc1234
//  (main, 2026-01-02T00:00:00Z)"; times add the p-value.
std::string describe(const Finding& finding);
std::string check_text(const CheckResult& result, const CheckOptions& options);

}  // namespace harness::history
