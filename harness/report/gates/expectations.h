#pragma once
// Expected syncs as a contract: an expectations file, committed beside the program, lists each
// sync and copy site (by line, site_diff.h) that a run may have, with its count per step, a
// reason and an optional tolerance. Checking a run against it fails on any site not in the file
// or above its count, naming the line; an entry that no longer occurs is stale (a warning, or a
// failure when strict). `bench --write-expectations F` and `run --write-expectations F` write one
// from a run, to be edited (the reasons are left for the user to give).
//
// A site is matched to an entry as compare matches sites (site_diff.h): by what it is, its file
// and function first, its line second, so that a line that moves within its function keeps
// passing.
//
// Format (version 1):
//   {"expectations_version": 1, "description": "...",
//    "sites": [{"scenario": "resume_adam", "variant": "resume_move_all/foreach",
//               "site": "sync" | "copy", "phase": "optimizer.step",
//               "what": "aten::_local_scalar_dense, item"  (copies: "blocking D2H"),
//               "frame": "train.py:42 in step", "library": "torch/optim/adam.py:1 in adam",
//               "per_step": 20, "tolerance": 0, "reason": "why this sync is allowed"}]}
#include <string>
#include <vector>

#include "harness/report/io/json_report.h"
#include "harness/report/model/result.h"

namespace harness {

inline constexpr int kExpectationsVersion = 1;

struct Expectation {
  std::string scenario, variant;
  bool sync = true;
  std::string phase, what, frame, library;
  double per_step = 0;
  double tolerance = 0;  // per step, above per_step
  std::string reason;
};

struct ExpectationsFile {
  std::string source;
  std::string description;
  std::vector<Expectation> entries;
};

// Throws InputError naming the file, the entry and the problem.
ExpectationsFile parse_expectations_file(const std::string& path);
ExpectationsFile parse_expectations_text(const std::string& text, const std::string& source);

// Every site of every variant of `report` that ran, with its count per step; reasons empty.
ReportJson expectations_json(const RunReport& report, const std::string& description);

struct ExpectationCheck {
  std::string source;
  std::vector<std::string> unexpected;  // sites not in the file: "scenario variant: +1 sync/..."
  std::vector<std::string> above;       // sites above their entry's count and tolerance
  std::vector<std::string> stale;       // entries that did not occur
  size_t checked = 0;                   // sites of the run that were checked
  size_t allowed = 0;                   // sites in regions the program allowed (not checked)

  bool failed(bool strict) const {
    return !unexpected.empty() || !above.empty() || (strict && !stale.empty());
  }
  // "expect: 12 sites checked against F: 1 unexpected, 0 above, 0 stale" and a line per problem.
  std::string text(bool strict) const;
};

ExpectationCheck check_expectations(const ExpectationsFile& file, const RunReport& report);

}  // namespace harness
