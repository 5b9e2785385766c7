#pragma once
// The HTML report: one self-contained page (inline CSS and SVG, no script, nothing fetched), for
// people and as a CI artifact. Top down: provenance and warnings (as the markdown summary), the
// gates' outcomes (failing rules first), then per scenario
//   - the variants' launches, copies, syncs and collectives per step, stacked by phase (phases
//     counted apart from the steps, which have no per-step time, in charts of their own);
//   - for variants with "impl" and "tensors" axes (fused_adam's scale/...), launches and step time
//     against the number of tensors, log-log, one line per implementation;
//   - every measured step's time per variant (strip plot, with the median and min..max);
//   - peak device and host memory by phase;
//   - the variants' table, the scenario's own tables and its sync sites.
// Every number drawn is a report value (or a phase's window count over its measured steps, as
// bench --phases prints it); marks carry it in their <title> and in data attributes (data-scenario,
// data-variant, data-side ("head", or "base"), data-metric: report metric paths joined by '+' for a
// sum, data-value), so tests can find them.
// Given a base report, base and head are side by side in every chart (bench --baseline, bench
// compare --format html). The page adds no report fields: it only reads a RunReport.
#include <string>
#include <vector>

#include "harness/report/gates/gate.h"
#include "harness/report/model/result.h"

namespace harness {

struct RunComparison;

struct HtmlPage {
  const RunReport* head = nullptr;  // the run; required
  const RunReport* base = nullptr;  // optional: drawn beside head
  std::string head_source;          // where they came from (file names), for the header
  std::string base_source;
  std::vector<GateOutcome> gates;             // evaluated on head (and base as its baseline)
  bool strict = false;                        // as the gates were judged (bench --strict)
  const RunComparison* comparison = nullptr;  // bench compare: its tally and changed rows
};

std::string render_html(const HtmlPage& page);

// The page's inline style sheet, for other pages in the same style (bench history show).
const char* html_page_style();

}  // namespace harness
