// The human form of a gate outcome, as bench prints it after the run.
#include "harness/report/gate.h"
#include "harness/report/text_table.h"

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

}  // namespace harness
