#pragma once
// Gates: thresholds on report metrics that CI enforces (file format: reports/gates/README.md).
//
// A GateFile is a parsed and validated gate file: every malformed thing is an InputError at parse
// time, naming the file, the rule and the problem. evaluate_gate applies it to a RunReport (and to
// a baseline report for baseline rules) and returns a GateOutcome with one RuleOutcome per rule and
// matched variant. Green must mean counted: with a GateScope (what bench runs and compares), a rule
// that names no scenario or variant the tool knows is an InputError before anything runs, and a
// rule for a known scenario or variant that the run left out fails unless allow_missing skips it.
// Without one, a rule whose patterns match nothing is skipped, and a gate in which every rule was
// skipped fails.
#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "harness/report/model/result.h"

namespace harness {

inline constexpr int kGateVersion = 1;

enum class RuleKind {
  Absolute,  // "max" and/or "min"
  Relative,  // "relative_to": <= max_ratio x the metric of another variant of the same report
  Baseline,  // "baseline": true: <= max_ratio x the same metric in the baseline report
  Equals,    // "equals": true/false, for the metrics "correctness.passed" and "status.ok"
};

// One rule of a gate file, validated.
struct GateRule {
  size_t index = 0;      // position in "rules"
  std::string name;      // "rules[<index>]" when the file gives no name
  std::string scenario;  // exact name or glob ('*')
  std::string variant;   // exact name or glob; what its '*' match fills relative_to's '*'
  std::string metric;    // a metric path (result.h), "correctness.passed" or "status.ok"
  RuleKind kind = RuleKind::Absolute;
  std::optional<double> max;           // Absolute
  std::optional<double> min;           // Absolute
  std::string relative_to;             // Relative: variant name, or pattern with the variant's '*'s
  double max_ratio = 1.0;              // Relative, Baseline
  std::optional<int64_t> min_samples;  // timed steps ("timing.step_time.count") required
  bool equals = true;                  // Equals
  // "test": "mann_whitney_u" on a Relative or Baseline rule: the metric is a sample series
  // ("samples.step_time") and the comparison is compare_times (statistics.h) with these options
  // (max_ratio default 1.10, min_samples default 10).
  bool statistical = false;
  double alpha = 0.01;
  // A statistical Baseline rule: fresh processes each run must have (bench --repetitions) for a
  // verdict between runs (statistics.h, compare_times); default 3.
  std::optional<int64_t> min_processes;
};

struct GateFile {
  std::string source;  // where it came from, for messages
  std::string description;
  std::vector<GateRule> rules;
};

// Throws InputError when the file cannot be read, is not JSON or is not a valid gate.
GateFile parse_gate_file(const std::string& path);
// The same on a file's contents; `source` names it in messages.
GateFile parse_gate_text(const std::string& text, const std::string& source);
GateFile parse_gate_json(const nlohmann::json& json, const std::string& source);

// Metric names that are not measurements; only "equals" rules use them.
inline constexpr const char* kCorrectnessPassed = "correctness.passed";
inline constexpr const char* kStatusOk = "status.ok";
// The sites by line (site_diff.h) that the run has and the baseline has not: a "baseline" rule
// on them fails on any new sync site (or copy site), naming its line; "max_ratio" does not apply.
inline constexpr const char* kNewSyncSites = "sync_sites.new";
inline constexpr const char* kNewCopySites = "copy_sites.new";

// Inconclusive: a statistical rule whose samples cannot decide (too few, or too few to reach
// alpha); it fails the gate only when evaluated strictly (bench --strict).
enum class RuleStatus { Pass, Fail, Skipped, Inconclusive };
const char* to_string(RuleStatus status);  // "PASS", "FAIL", "SKIP", "INCONCLUSIVE"

// The result of one rule on one variant (or on none: skipped).
struct RuleOutcome {
  std::string rule;      // the rule's name
  std::string scenario;  // the scenario it applied to; the rule's pattern when skipped
  std::string variant;   // the variant it applied to; the rule's pattern when skipped
  std::string metric;
  RuleStatus status = RuleStatus::Skipped;
  std::optional<double> actual;  // the variant's value (1/0 for equals rules)
  std::string allowed;           // e.g. "<= 4 (1.0 x 4 of fresh/foreach)"
  std::string message;           // e.g. "actual 12 > allowed 4 (1.0 x 4 of fresh/foreach)", or why
};

struct GateOutcome {
  std::string source;  // the gate file
  std::vector<RuleOutcome> outcomes;

  size_t count(RuleStatus status) const;
  // No rule failed (nor was inconclusive, when strict) and at least one rule was evaluated.
  bool passed(bool strict = false) const;
};

// The scenarios a gate may name, each with every variant it can report: bench's registry with the
// run's options (and the "rank<r>/" copies of a scenario on ranks), plus what the reports at hand
// hold.
using GateCatalog = std::map<std::string, std::vector<std::string>>;

// Adds every scenario and variant of `report` to `catalog`.
void add_to_catalog(GateCatalog& catalog, const RunReport& report);

// Throws InputError naming the file and the rule when a rule's scenario pattern matches no
// scenario of `catalog`, or its variant pattern no variant of those scenarios: a rule that can
// never be evaluated (a typo) must not pass by being skipped.
void check_gate_names(const GateFile& gate, const GateCatalog& catalog);

struct GateScope {
  const GateCatalog* catalog = nullptr;  // what can exist; nullptr: only what the report has
  bool allow_missing = false;  // a known scenario or variant the run left out: SKIP, not FAIL
};

// Applies the gate to `report`. `baseline` is needed when the gate has baseline rules: without it
// they are an InputError. A rule comparing a time ("ns") with a baseline without "min_samples" is
// an InputError too (a malformed gate).
// With `scope.catalog`, each scenario and variant of the catalog that a rule matches but the run
// does not have gets an outcome of its own: FAIL ("not in the run"), or SKIP with allow_missing.
GateOutcome evaluate_gate(const GateFile& gate, const RunReport& report, const RunReport* baseline,
                          const GateScope& scope = {});

// One aligned line per outcome ("FAIL  scenario  variant  metric  actual ..."), then the summary
// line "gate: 3 passed, 1 failed, 0 skipped" (and why the gate failed when nothing was evaluated).
std::string format_gate_outcome(const GateOutcome& outcome, bool strict = false);
// The same as a markdown section (a heading and a table, failing rules first), as the markdown
// summaries of bench and bench compare end.
std::string format_gate_outcome_markdown(const GateOutcome& outcome, bool strict = false);

}  // namespace harness
