#pragma once
// bench compare BASE.json HEAD.json: what changed between two runs, as text, markdown, JSON or HTML,
// with gates evaluated on the pair (head as the run, base as the baseline). See run_compare.h.
#include <string>
#include <vector>

#include "harness/errors.h"
#include "harness/report/compare/statistics.h"

namespace harness {

struct CompareOptions {
  std::string base;
  std::string head;
  std::string format = "text";  // text, markdown, json, html
  std::string out;              // empty: stdout
  std::string html;             // --html: the HTML page too, to this file
  std::vector<std::string> gates;
  bool strict = false;  // inconclusive rows and rules fail
  bool all = false;     // text: every row, not only the changed ones
  bool phase_times = false;  // also test each phase's time series
  bool host_memory = false;  // host memory levels of scenarios on ranks get a verdict
  bool allow_missing = false;  // gate rules for scenarios head did not run are skipped
  TimeTestOptions time;
};

// 0 nothing regressed, 1 a regression (or a failing gate), 2 bad input (thrown as InputError).
ExitCode run_compare(const CompareOptions& options);

}  // namespace harness
