#pragma once
// What makes a step-time change point of a history a regression, beyond E-Divisive's own test
// (change_points.h), which judges one series at a time:
//   - The correction over all series of a check: a check of 200 series makes 200 tests, so the
//     p-values of every series' change points are held to Benjamini-Hochberg's false discovery
//     rate (Benjamini and Hochberg, 1995): sorted p_(1) <= ... <= p_(m), the changes with
//     p <= p_(k) are kept, k the largest i with p_(i) <= i q / m. m counts every time series once
//     at least (a series without a change point is a test that found nothing).
//   - Persistence beyond the machine: a change of the code stays in every later run, a busy
//     machine comes and goes. From the change on, each run whose step time lies beyond the middle
//     of the old and new levels (the segments' medians) confirms it, until a run is back at the
//     old level, unless the machine explains it: its threads waited for a CPU (report
//     `timing.cpu_wait.share`, judged by harness::contention, as bench compare judges it), or its
//     step time, scaled by its machine probe to the probe of the runs before the change, is back
//     on the old side (the discount of bench compare's machine_drift, run by run: a history keeps
//     one probe median a run, not the probe's samples). A rise fails only when min_runs runs
//     confirm it (HUD's rule: two consecutive breaches).
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "harness/report/history/store.h"

namespace harness::history {

// The largest p-value that Benjamini-Hochberg at level `q` keeps among `pvalues`, of `tests`
// tests in all (tests >= pvalues.size()); nullopt when it keeps none.
std::optional<double> benjamini_hochberg_cutoff(std::vector<double> pvalues, size_t tests, double q);

// The runs of a series at the new level of a time change, and what the machine says of them.
struct NewLevel {
  size_t runs = 0;                   // runs from the change on, until one is back at the old level
  size_t confirming = 0;             // of them, runs the machine does not explain
  std::vector<std::string> machine;  // one line per run it explains: "run 12 (2026-01-12...): ..."
};

// A time change of `series` at point `begin` (of its measured points `values`, run `at[i]` of the
// series): the segment before it is [from, begin), the new one [begin, end). `machine`: the
// machine's series of the history (SeriesSet::Machine); a run without them is not explained by
// the machine.
struct Segments {
  size_t from = 0, begin = 0, end = 0;
};
NewLevel judge_new_level(const Series& series, const std::vector<size_t>& at,
                         const std::vector<double>& values, Segments segments,
                         const std::vector<Series>& machine);

}  // namespace harness::history
