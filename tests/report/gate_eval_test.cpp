// Gate evaluation on the sample report: each rule kind, captures, skips, failures, formatting.
#include <gtest/gtest.h>

#include "harness/report/gate.h"
#include "test_support.h"

namespace harness {
namespace {

using nlohmann::json;

GateOutcome evaluate(const json& rules, const RunReport* baseline = nullptr) {
  const GateFile gate = parse_gate_json({{"gate_version", 1}, {"rules", rules}}, "gates/ci.json");
  return evaluate_gate(gate, sample_report(), baseline);
}

json on(const std::string& variant, const std::string& metric, json comparison) {
  json r = {{"name", "rule on " + variant},
            {"scenario", "resume_adam"},
            {"variant", variant},
            {"metric", metric}};
  r.update(comparison);
  return r;
}

const RuleOutcome& only(const GateOutcome& g) {
  EXPECT_EQ(g.outcomes.size(), 1u);
  return g.outcomes.at(0);
}

TEST(GateEval, RelativeWithCapturePasses) {
  const GateOutcome g = evaluate(
      json::array({on("resume_keep_step/*", "per_step.d2h.count", {{"relative_to", "fresh/*"}})}));
  const RuleOutcome& o = only(g);
  EXPECT_EQ(o.status, RuleStatus::Pass);
  EXPECT_EQ(o.variant, "resume_keep_step/foreach");
  EXPECT_EQ(o.actual, 4.0);
  EXPECT_EQ(o.allowed, "<= 4 (1.0 x 4 of fresh/foreach)");
  EXPECT_TRUE(g.passed());
}

TEST(GateEval, RelativeWithCaptureFails) {
  const GateOutcome g = evaluate(
      json::array({on("resume_move_all/*", "per_step.d2h.count", {{"relative_to", "fresh/*"}})}));
  const RuleOutcome& o = only(g);
  EXPECT_EQ(o.status, RuleStatus::Fail);
  EXPECT_EQ(o.actual, 12.0);
  EXPECT_EQ(o.allowed, "<= 4 (1.0 x 4 of fresh/foreach)");
  EXPECT_EQ(o.message, "actual 12 > allowed 4 (1.0 x 4 of fresh/foreach)");
  EXPECT_FALSE(g.passed());
}

TEST(GateEval, RelativeRatioAndMissingReference) {
  const GateOutcome g = evaluate(json::array(
      {on("resume_move_all/*", "per_step.d2h.count",
          {{"relative_to", "fresh/*"}, {"max_ratio", 3}}),
       on("resume_move_all/foreach", "per_step.d2h.count", {{"relative_to", "fresh/nothing"}}),
       on("resume_keep_step/*", "per_step.d2h.count", {{"relative_to", "resume_rebuild/*"}})}));
  ASSERT_EQ(g.outcomes.size(), 3u);
  EXPECT_EQ(g.outcomes[0].status, RuleStatus::Pass);
  EXPECT_EQ(g.outcomes[0].allowed, "<= 12 (3.0 x 4 of fresh/foreach)");
  EXPECT_EQ(g.outcomes[1].status, RuleStatus::Fail);
  EXPECT_CONTAINS(g.outcomes[1].message, "reference variant 'fresh/nothing' is not in scenario");
  EXPECT_EQ(g.outcomes[2].status, RuleStatus::Fail);
  EXPECT_CONTAINS(g.outcomes[2].message, "checkpoint not found");
}

TEST(GateEval, AbsoluteMax) {
  const GateOutcome g = evaluate(json::array(
      {on("fresh/foreach", "per_step.sync.count", {{"max", 0}}),
       on("resume_move_all/foreach", "per_step.sync.count", {{"max", 0}}),
       on("fresh/forloop", "per_step.launch.count", {{"min", 1}, {"max", 2.5}}),
       on("resume_move_all/foreach", "phase[optimizer.step].sync.count", {{"max", 39}})}));
  ASSERT_EQ(g.outcomes.size(), 4u);
  EXPECT_EQ(g.outcomes[0].status, RuleStatus::Pass);
  EXPECT_EQ(g.outcomes[0].message, "actual 0 <= allowed 0");
  EXPECT_EQ(g.outcomes[1].status, RuleStatus::Fail);
  EXPECT_EQ(g.outcomes[1].message, "actual 8 > allowed 0");
  EXPECT_EQ(g.outcomes[2].status, RuleStatus::Pass);
  EXPECT_EQ(g.outcomes[2].allowed, "in [1, 2.5]");
  EXPECT_EQ(g.outcomes[2].actual, 2.4);
  EXPECT_EQ(g.outcomes[3].status, RuleStatus::Fail);
  EXPECT_EQ(g.outcomes[3].actual, 40.0);
}

TEST(GateEval, BaselineCountsMustNotRise) {
  RunReport baseline = sample_report();
  sample_variant(baseline, "resume_move_all/foreach").per_step[2].value = 4;  // d2h.count
  const GateOutcome g =
      evaluate(json::array({on("*", "per_step.d2h.count", {{"baseline", true}})}), &baseline);
  ASSERT_EQ(g.outcomes.size(), 5u);
  EXPECT_EQ(g.outcomes[0].status, RuleStatus::Pass);  // fresh/foreach
  EXPECT_EQ(g.outcomes[1].status, RuleStatus::Fail);  // resume_move_all/foreach
  EXPECT_EQ(g.outcomes[1].message, "actual 12 > allowed 4 (1.0 x 4 of baseline)");
  EXPECT_EQ(g.outcomes[3].status, RuleStatus::Fail);  // resume_rebuild failed in this run
  EXPECT_CONTAINS(g.outcomes[3].message, "variant failed to run: checkpoint not found");
  EXPECT_FALSE(g.passed());
}

TEST(GateEval, BaselineMissingVariantIsSkipped) {
  RunReport baseline = sample_report();
  baseline.scenarios[0].variants.erase(baseline.scenarios[0].variants.begin());
  const GateOutcome g = evaluate(
      json::array({on("fresh/foreach", "per_step.d2h.count", {{"baseline", true}})}), &baseline);
  EXPECT_EQ(only(g).status, RuleStatus::Skipped);
  EXPECT_EQ(only(g).message, "not in the baseline report");
}

TEST(GateEval, BaselineTimeRuleNeedsSamples) {
  const RunReport baseline = sample_report();
  const json median = on("fresh/foreach", "timing.step_time.median",
                         {{"baseline", true}, {"max_ratio", 1.1}, {"min_samples", 5}});
  EXPECT_EQ(only(evaluate(json::array({median}), &baseline)).status, RuleStatus::Pass);

  json strict = median;
  strict["min_samples"] = 10;
  const RuleOutcome o = only(evaluate(json::array({strict}), &baseline));
  EXPECT_EQ(o.status, RuleStatus::Fail);
  EXPECT_CONTAINS(o.message, "variant has 5 timed steps");

  json no_samples = median;
  no_samples.erase("min_samples");
  EXPECT_CONTAINS(input_error([&] { evaluate(json::array({no_samples}), &baseline); }),
                  "give 'min_samples'");
}

TEST(GateEval, AnyTimeComparedWithABaselineNeedsMinSamples) {
  RunReport report = sample_report();
  sample_variant(report, "fresh/foreach").total.push_back({"wait", 100, "ns", "time waiting"});
  const GateFile gate = parse_gate_json(
      {{"gate_version", 1},
       {"rules", json::array({on("fresh/foreach", "total.wait", {{"baseline", true}})})}},
      "gates/ci.json");
  EXPECT_CONTAINS(input_error([&] { evaluate_gate(gate, report, &report); }),
                  "gate file 'gates/ci.json': rules[0] (\"rule on fresh/foreach\"): compares a "
                  "time (total.wait, in ns) with a baseline: give 'min_samples'");
}

TEST(GateEval, BaselineRuleWithoutBaselineReportIsAnInputError) {
  EXPECT_CONTAINS(input_error([&] {
                    evaluate(json::array({on("*", "per_step.d2h.count", {{"baseline", true}})}));
                  }),
                  "no baseline report was given");
}

TEST(GateEval, UnmatchedPatternIsSkipped) {
  const GateOutcome g =
      evaluate(json::array({on("nope/*", "per_step.d2h.count", {{"max", 0}}),
                            on("fresh/foreach", "per_step.sync.count", {{"max", 0}})}));
  ASSERT_EQ(g.outcomes.size(), 2u);
  EXPECT_EQ(g.outcomes[0].status, RuleStatus::Skipped);
  EXPECT_EQ(g.outcomes[0].variant, "nope/*");
  EXPECT_CONTAINS(g.outcomes[0].message, "no variant matches 'nope/*'");
  EXPECT_CONTAINS(g.outcomes[0].message, "fresh/foreach");
  EXPECT_FALSE(g.outcomes[0].actual);
  EXPECT_TRUE(g.passed());
}

TEST(GateEval, GateInWhichEveryRuleWasSkippedFails) {
  json misspelt = on("fresh/foreach", "per_step.d2h.count", {{"max", 0}});
  misspelt["scenario"] = "resume_adma";
  const GateOutcome g = evaluate(json::array({misspelt}));
  EXPECT_EQ(only(g).status, RuleStatus::Skipped);
  EXPECT_CONTAINS(only(g).message, "no scenario in the report matches 'resume_adma'");
  EXPECT_FALSE(g.passed());
  EXPECT_CONTAINS(format_gate_outcome(g), "no rule was evaluated");
}

TEST(GateEval, UnknownMetricFailsAndListsAvailableNames) {
  const RuleOutcome o =
      only(evaluate(json::array({on("fresh/foreach", "per_step.d2h.cnt", {{"max", 0}})})));
  EXPECT_EQ(o.status, RuleStatus::Fail);
  EXPECT_CONTAINS(o.message, "unknown metric 'per_step.d2h.cnt'");
  EXPECT_CONTAINS(o.message, "per_step.d2h.count");
}

TEST(GateEval, FailedVariantFailsItsRules) {
  const GateOutcome g = evaluate(
      json::array({on("resume_rebuild/foreach", "per_step.d2h.count", {{"max", 100}}),
                   on("resume_rebuild/foreach", "status.ok", {{"equals", true}}),
                   on("resume_rebuild/foreach", "correctness.passed", {{"equals", true}})}));
  ASSERT_EQ(g.outcomes.size(), 3u);
  for (const auto& o : g.outcomes) {
    EXPECT_EQ(o.status, RuleStatus::Fail) << o.metric;
    EXPECT_CONTAINS(o.message, "checkpoint not found");
  }
  EXPECT_EQ(g.outcomes[1].message, "actual false != expected true: checkpoint not found");
}

TEST(GateEval, EqualsRules) {
  const GateOutcome g = evaluate(json::array({on("*", "correctness.passed", {{"equals", true}}),
                                              on("fresh/*", "status.ok", {{"equals", true}})}));
  ASSERT_EQ(g.outcomes.size(), 7u);
  EXPECT_EQ(g.outcomes[0].status, RuleStatus::Pass);
  EXPECT_EQ(g.outcomes[0].allowed, "== true");
  EXPECT_EQ(g.outcomes[3].status, RuleStatus::Fail);     // resume_rebuild/foreach did not run
  EXPECT_EQ(g.outcomes[4].status, RuleStatus::Skipped);  // fresh/forloop has no check
  EXPECT_EQ(g.outcomes[4].message, "variant has no correctness check");
  EXPECT_EQ(g.outcomes[5].status, RuleStatus::Pass);
  EXPECT_EQ(g.outcomes[5].actual, 1.0);
}

TEST(GateEval, FormatShowsEachOutcomeAndTheSummary) {
  const GateOutcome g = evaluate(
      json::array({on("resume_move_all/*", "per_step.d2h.count", {{"relative_to", "fresh/*"}}),
                   on("resume_keep_step/*", "per_step.d2h.count", {{"relative_to", "fresh/*"}}),
                   on("nope", "per_step.d2h.count", {{"max", 1}})}));
  const std::string text = format_gate_outcome(g);
  EXPECT_CONTAINS(text, "gate gates/ci.json\n");
  EXPECT_CONTAINS(text,
                  "FAIL  resume_adam  resume_move_all/foreach   per_step.d2h.count  actual 12 > "
                  "allowed 4 (1.0 x 4 of fresh/foreach)  [rule: rule on resume_move_all/*]");
  EXPECT_CONTAINS(text,
                  "PASS  resume_adam  resume_keep_step/foreach  per_step.d2h.count  actual 4 "
                  "<= allowed 4 (1.0 x 4 of fresh/foreach)\n");
  EXPECT_CONTAINS(text, "SKIP  resume_adam  nope");
  EXPECT_CONTAINS(text, "gate: 1 passed, 1 failed, 1 skipped\n");
}

}  // namespace
}  // namespace harness
