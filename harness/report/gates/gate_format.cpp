// The human form of a gate outcome, as bench prints it after the run.
#include "harness/report/text/format.h"
#include "harness/report/gates/gate.h"
#include "harness/report/text/text_table.h"

namespace harness {

std::string format_gate_outcome(const GateOutcome& outcome, bool strict) {
  TextTable table({}, "lllll");
  for (const auto& o : outcome.outcomes) {
    const std::string message =
        o.status == RuleStatus::Pass ? o.message : o.message + "  [rule: " + o.rule + "]";
    table.add_row({to_string(o.status), o.scenario, o.variant, o.metric, message});
  }
  std::string out = "gate " + outcome.source + "\n" + table.render("  ");
  out += "gate: " + std::to_string(outcome.count(RuleStatus::Pass)) + " passed, " +
         std::to_string(outcome.count(RuleStatus::Fail)) + " failed, " +
         std::to_string(outcome.count(RuleStatus::Skipped)) + " skipped";
  const size_t inconclusive = outcome.count(RuleStatus::Inconclusive);
  if (inconclusive > 0) {
    out += ", " + std::to_string(inconclusive) + " inconclusive" +
           (strict ? " (--strict: the gate fails)" : " (not failing; --strict fails on them)");
  }
  out += "\n";
  if (outcome.count(RuleStatus::Pass) + outcome.count(RuleStatus::Fail) + inconclusive == 0) {
    out +=
        "gate: FAILED: no rule was evaluated (every rule was skipped); check the scenario and "
        "variant names in " +
        outcome.source + "\n";
  }
  return out;
}

std::string format_gate_outcome_markdown(const GateOutcome& outcome, bool strict) {
  std::string out = "\n### Gate `" + markdown_cell(outcome.source) + "`: " +
                    (outcome.passed(strict) ? "passed" : "**FAILED**") + "\n\n";
  out += markdown_table_header({"", "scenario", "variant", "metric", "outcome"}, "lllll");
  for (int failing = 1; failing >= 0; --failing) {  // failing rules first
    for (const RuleOutcome& o : outcome.outcomes) {
      const bool fails =
          o.status == RuleStatus::Fail || (strict && o.status == RuleStatus::Inconclusive);
      if (fails != (failing == 1)) continue;
      out += markdown_table_row({to_string(o.status), o.scenario, o.variant, o.metric,
                                 o.message + (fails ? " [rule: " + o.rule + "]" : "")},
                                5);
    }
  }
  return out;
}

}  // namespace harness
