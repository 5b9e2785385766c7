#pragma once
// bench history check: what changed along each series of the history, and whether the newest runs
// start a regression.
//   - Counts (exact): any change between consecutive runs is a finding, named with the first run
//     (commit) that has the new value.
//   - Times (each run's median step time): E-Divisive with a t-test (change_points.h). A shift
//     found between runs of one commit, where that commit's earlier runs sit at the old level, is
//     the machine's (load, another tenant), not the code's: reported as such, never failed. Where
//     that commit's earlier runs sit at the new level, the change is moved to its first run.
//     Times are then held to the rules of significance.h: a minimum effect (min_magnitude), the
//     false discovery rate over all series of the check (Benjamini-Hochberg at `fdr`), and
//     persistence: a rise fails only when `min_runs` runs at the new level show it that the
//     machine (its probe, its wait for a CPU) does not explain. Counts are exact: one run is
//     enough.
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

// The defaults, and why (docs/ci.md, "History over many commits"):
//   - min_magnitude 5 %: the smallest step-time change worth a red CI job; run-to-run noise of a
//     few percent (the +2.2 % of pure +-2.5 % noise) stays below it.
//   - fdr 0.001, Otava's own p-value threshold, now over all series of the check: E-Divisive
//     reports the best split of each window, so its p-values are smaller than chance would make
//     them; at q = 0.05 pure noise of +-10 % still failed histories of 200 series.
//   - min_runs 2: HUD's rule (two consecutive breaches). One run is one draw of the machine; a
//     change of the code is in every later run, and waiting for a second costs one run.
struct CheckOptions {
  size_t since = 5;     // a change starting in the newest `since` runs of its series is new
  size_t min_runs = 2;  // runs at the new level, not the machine's, a time regression needs
  double fdr = 0.001;   // Benjamini-Hochberg level over all time change points of a check
  ChangePointOptions change_points{50, 0.001, 0.05};
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
  size_t runs_at_new_level = 0;   // times: runs in the segment the change starts
  size_t confirming_runs = 0;     // times: of those, runs the machine does not explain
  std::vector<std::string> machine;  // times: the runs the machine explains, and how
  bool persists = true;           // counts; times: confirming_runs >= min_runs
  // Counts of syncs or copies: the lines whose count per step changed at the same run
  // ("+1 sync/step at train.py:42 in step (...)"), from the sites' series.
  std::vector<std::string> sites;

  double relative_change() const;  // after / before - 1 (0 when before is 0)
  bool fails() const { return regression && recent && !within_one_build && persists; }
};

// The change points of one series, as findings (oldest first), before the correction over all
// series. `machine`: the history's machine series (SeriesSet::Machine), to tell the runs the
// machine explains.
std::vector<Finding> series_findings(const Series& series, const CheckOptions& options,
                                     const std::vector<Series>& machine = {});

// Every series' findings (index-aligned with `series`), the time change points kept by the
// correction over all of them (significance.h), and how many it dropped.
struct AllFindings {
  std::vector<std::vector<Finding>> of_series;
  size_t dropped = 0;
};
AllFindings all_findings(const std::vector<Series>& series, const CheckOptions& options,
                         const std::vector<Series>& machine = {});

// The lines of a count change's variant whose count per step changed at the same run, described
// as bench compare describes them; empty for a time, or a count not made of sites.
std::vector<std::string> finding_sites(const Series& series, const Finding& finding,
                                       const std::vector<Series>& sites);

struct CheckResult {
  size_t series_checked = 0;
  size_t runs = 0;
  size_t time_changes_dropped = 0;  // significant in their series, not over all series
  std::vector<Finding> findings;  // by scenario, variant, metric, then index
  bool failed() const;
};

// `sites`: the sites' series (Store::series(filter, true)), to name the lines a change of
// per_step.sync.count, .h2d.count or .d2h.count came with; empty: none named.
CheckResult check_history(const std::vector<Series>& series, size_t runs,
                          const CheckOptions& options, const std::vector<Series>& sites = {},
                          const std::vector<Series>& machine = {});

// "resume_adam resume_move_all/foreach per_step.d2h.count: 20 -> 40 (+100%) from commit abc1234
//  (main, 2026-01-02T00:00:00Z)"; times add the p-value.
std::string describe(const Finding& finding);
std::string check_text(const CheckResult& result, const CheckOptions& options);

}  // namespace harness::history
