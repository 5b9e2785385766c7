#pragma once
// bench compare: two reports side by side, for a pull request. compare_reports pairs every
// (scenario, variant, metric) of a base and a head report and decides what changed:
//   - counts and bytes (launches, copies, syncs, collectives, memory) are exact: any rise is a
//     regression, any fall an improvement;
//   - times are decided on their sample series with compare_times (statistics.h): a regression
//     needs significance and a ratio above max_ratio; too few samples are inconclusive;
//   - a variant that stops running or a correctness check that starts failing is a regression;
//   - what only head has is new, what only base has is missing;
//   - what cannot carry a verdict gets none: host memory levels of scenarios on ranks vary from
//     run to run (Gloo's and autograd's threads allocate while phase boundaries are read), so they
//     are informational unless asked for; times of a scenario whose ranks outnumbered the CPUs
//     (oversubscription(), result.h) are inconclusive.
// The result renders as text, markdown (for $GITHUB_STEP_SUMMARY and PR comments) or JSON.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "harness/report/gates/gate.h"
#include "harness/report/io/json_report.h"
#include "harness/report/model/result.h"
#include "harness/report/compare/site_diff.h"
#include "harness/report/compare/statistics.h"

namespace harness {

enum class Change { Regression, Improvement, Unchanged, Inconclusive, New, Missing, Info };
// "regression", "improvement", ..., "informational" (a figure shown without a verdict)
const char* to_string(Change change);

struct ComparedMetric {
  std::string scenario;
  std::string variant;
  std::string metric;  // a metric path; time series as "samples.<name>"
  std::string unit;
  std::optional<double> base;  // for series: the median
  std::optional<double> head;
  Change change = Change::Unchanged;
  std::optional<TimeComparison> time;  // series only
  std::string note;                    // why, when the numbers alone do not say

  // Shown among the changed rows: anything but unchanged and informational.
  bool changed() const { return change != Change::Unchanged && change != Change::Info; }
};

// A provenance field that differs between the runs (device, instrument, build type, ...).
struct EnvironmentDifference {
  std::string field;
  std::string base;
  std::string head;
};

struct RunComparison {
  std::string base_source;  // file names, for headers
  std::string head_source;
  Provenance base;
  Provenance head;
  std::vector<EnvironmentDifference> environment;
  std::vector<std::string> notes;  // what was not compared and why, config differences
  std::vector<ComparedMetric> rows;  // in report order (renderers put changed rows first)
  std::vector<GateOutcome> gates;    // --gate: evaluated with head as the run, base as baseline
  // Sites by line whose count per step changed (site_diff.h): what the rows' count changes are
  // made of. They carry no verdict of their own (the rows and gates do).
  std::vector<SiteChange> sites;
  TimeTestOptions time_options;

  size_t count(Change change) const;
  // A regression row, or a failing gate; with `strict`, an inconclusive row or gate rule too.
  bool failed(bool strict) const;
  // "1 regression, 0 improvements, 42 unchanged, 1 inconclusive, 0 new, 0 missing,
  // 3 informational"
  std::string tally() const;
};

// `phase_times`: also test each phase's time series (samples.phase[...].time) and each step's
// time waited in syncs (samples.sync.wait_time), not only the step's wall and CPU times. They are
// diagnostic: short phases and waits are dominated by timer and scheduling noise, so they are
// left out unless asked for. `host_memory`: also give host memory levels of scenarios on ranks a
// verdict (by default informational: they vary from run to run).
RunComparison compare_reports(const RunReport& base, const RunReport& head,
                              const TimeTestOptions& time_options, bool phase_times = false,
                              bool host_memory = false);

// Renderings. Text: the changed rows as a table, then the tally; `all`: every row.
std::string comparison_text(const RunComparison& comparison, bool all, bool strict);
// Markdown: a heading with the tally, the runs and their environment differences, the changed
// rows, every other row inside <details>, the gates; never longer than `max_bytes` (rows that do
// not fit are counted, not shown).
inline constexpr size_t kMarkdownLimit = 60 * 1000;
std::string comparison_markdown(const RunComparison& comparison, bool strict,
                                size_t max_bytes = kMarkdownLimit);
ReportJson comparison_json(const RunComparison& comparison, bool strict);

// The columns of a compared row as the text and markdown renderings show them (with their
// TextTable alignment), and one row's cells, the first being `verdict` (the HTML report's too).
const std::vector<std::string>& comparison_columns();
std::string comparison_alignment();
std::vector<std::string> comparison_cells(const ComparedMetric& row, const std::string& verdict,
                                          const TimeTestOptions& options);

}  // namespace harness
