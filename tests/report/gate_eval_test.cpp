// Gate evaluation on the sample report: each rule kind, captures, skips, failures, formatting.
#include <gtest/gtest.h>

#include "harness/report/gates/gate.h"
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

// Statistical rules: "test": "mann_whitney_u" on the step time series (the numbers of
// statistics_test.cpp's sample A: ratio 1.135, p 0.0003).
RunReport with_step_times(std::vector<double> fresh, std::vector<double> keep_step) {
  RunReport report = sample_report();
  sample_variant(report, "fresh/foreach").samples["step_time"] = std::move(fresh);
  sample_variant(report, "resume_keep_step/foreach").samples["step_time"] = std::move(keep_step);
  return report;
}
const std::vector<double> kSlow = {12.1, 13.4, 11.8, 14.2, 13.9, 12.7,
                                   15.1, 13.3, 14.8, 12.9, 13.6, 14.4};
const std::vector<double> kFast = {11.2, 12.0, 11.5, 12.6, 11.9, 12.3, 11.1, 12.8, 11.7, 12.2};

json mann_whitney(const std::string& variant, json comparison) {
  comparison.update({{"test", "mann_whitney_u"}});
  return on(variant, "samples.step_time", comparison);
}

TEST(GateEval, StatisticalRuleAgainstAnotherVariant) {
  const RunReport report = with_step_times(kFast, kSlow);
  const GateFile gate = parse_gate_json(
      {{"gate_version", 1},
       {"rules", json::array({mann_whitney("resume_keep_step/foreach",
                                           {{"relative_to", "fresh/foreach"}})})}},
      "g.json");
  const GateOutcome g = evaluate_gate(gate, report, nullptr);
  const RuleOutcome& o = only(g);
  EXPECT_EQ(o.status, RuleStatus::Fail) << o.message;
  EXPECT_NEAR(*o.actual, 1.1353403540903542, 1e-12);
  EXPECT_CONTAINS(o.message, "ratio 1.135 [1.062, 1.207], slower with p 3.0e-04 < 0.010");
  EXPECT_CONTAINS(o.message, "(fresh/foreach)");
  EXPECT_EQ(o.allowed, "not slower than 1.1 x fresh/foreach at p < 0.01");
  EXPECT_FALSE(g.passed());
  // A ratio within max_ratio passes even when significant.
  json lenient = mann_whitney("resume_keep_step/foreach", {{"relative_to", "fresh/foreach"}});
  lenient["max_ratio"] = 1.2;
  const GateFile lenient_gate =
      parse_gate_json({{"gate_version", 1}, {"rules", json::array({lenient})}}, "g.json");
  EXPECT_EQ(only(evaluate_gate(lenient_gate, report, nullptr)).status, RuleStatus::Pass);
}

TEST(GateEval, StatisticalRuleAgainstTheBaseline) {
  const RunReport base = with_step_times(kFast, kFast);
  const RunReport slower = with_step_times(kSlow, kFast);
  const json r = mann_whitney("fresh/foreach", {{"baseline", true}, {"min_processes", 1}});
  const GateFile gate = parse_gate_json({{"gate_version", 1}, {"rules", json::array({r})}}, "g");
  EXPECT_EQ(only(evaluate_gate(gate, slower, &base)).status, RuleStatus::Fail);
  EXPECT_EQ(only(evaluate_gate(gate, base, &slower)).status, RuleStatus::Pass);  // faster
  EXPECT_EQ(only(evaluate_gate(gate, base, &base)).status, RuleStatus::Pass);
}

TEST(GateEval, BaselineTimeRulesJudgeOnlyTimesThatCanCarryAVerdict) {
  const RunReport base = with_step_times(kFast, kFast);
  RunReport slower = with_step_times(kSlow, kFast);
  const json r = mann_whitney("fresh/foreach", {{"baseline", true}, {"min_processes", 1}});
  const GateFile gate = parse_gate_json({{"gate_version", 1}, {"rules", json::array({r})}}, "g");
  // Measured while other work held the cores: the slowdown may be that load.
  sample_variant(slower, "fresh/foreach").timing.push_back({"cpu_wait.share", 0.4, "ratio", ""});
  RuleOutcome o = only(evaluate_gate(gate, slower, &base));
  EXPECT_EQ(o.status, RuleStatus::Inconclusive) << o.message;
  EXPECT_CONTAINS(o.message, "its threads waited for a CPU 40% of the time");
  EXPECT_EQ(only(evaluate_gate(gate, base, &slower)).status, RuleStatus::Pass);  // no slowdown
  // Its scenario's ranks (2, the sample's) as many as the CPUs: inconclusive either way.
  slower.provenance.ranks_per_host = 2;
  slower.provenance.cpu_count = 2;
  o = only(evaluate_gate(gate, slower, &base));
  EXPECT_EQ(o.status, RuleStatus::Inconclusive);
  EXPECT_CONTAINS(o.message, "2 ranks on 2 CPU(s)");
  EXPECT_EQ(only(evaluate_gate(gate, base, &slower)).status, RuleStatus::Inconclusive);
}

TEST(GateEval, ABaselineSlowdownThatTheMachineProbeShowsIsInconclusive) {
  RunReport base = with_step_times(kFast, kFast);
  RunReport slower = with_step_times(kSlow, kFast);  // ratio about 1.13, beyond the rule's 1.10
  const json r = mann_whitney("fresh/foreach", {{"baseline", true}, {"min_processes", 1}});
  const GateFile gate = parse_gate_json({{"gate_version", 1}, {"rules", json::array({r})}}, "g");
  EXPECT_EQ(only(evaluate_gate(gate, slower, &base)).status, RuleStatus::Fail);
  // The probe after each step was 1.12x slower in the run too: the machine's slowdown.
  std::vector<double> probe;
  for (int i = 0; i < 12; ++i) probe.push_back(20000 + 50 * (i % 4));
  sample_variant(base, "fresh/foreach").samples["machine_probe"] = probe;
  for (double& x : probe) x *= 1.12;
  sample_variant(slower, "fresh/foreach").samples["machine_probe"] = probe;
  const RuleOutcome o = only(evaluate_gate(gate, slower, &base));
  EXPECT_EQ(o.status, RuleStatus::Inconclusive) << o.message;
  EXPECT_CONTAINS(o.message, "the machine itself was slower in head's run");
}

TEST(GateEval, TooFewSamplesAreInconclusiveAndFailOnlyWhenStrict) {
  // The sample report has 5 step times per variant: fewer than min_samples 10.
  const RunReport report = sample_report();
  const GateOutcome g = evaluate(json::array({mann_whitney("fresh/foreach", {{"baseline", true}})}),
                                 &report);
  const RuleOutcome& o = only(g);
  EXPECT_EQ(o.status, RuleStatus::Inconclusive);
  EXPECT_CONTAINS(o.message, "5 vs 5 timed steps: fewer than min_samples 10 on a side");
  EXPECT_TRUE(g.passed());
  EXPECT_FALSE(g.passed(/*strict=*/true));
  EXPECT_CONTAINS(format_gate_outcome(g), "1 inconclusive (not failing; --strict fails on them)");
  EXPECT_CONTAINS(format_gate_outcome(g, true), "1 inconclusive (--strict: the gate fails)");
  // A baseline from before schema 1.2 has no samples: inconclusive too.
  RunReport old = sample_report();
  sample_variant(old, "fresh/foreach").samples.clear();
  EXPECT_CONTAINS(
      only(evaluate(json::array({mann_whitney("fresh/foreach", {{"baseline", true}})}), &old))
          .message,
      "reports before schema 1.2 keep no samples");
  // A series the variant does not have fails, naming what it has.
  const RuleOutcome missing = only(evaluate(json::array(
      {on("fresh/foreach", "samples.step_cpu_time",
          {{"test", "mann_whitney_u"}, {"relative_to", "fresh/forloop"}})})));
  EXPECT_EQ(missing.status, RuleStatus::Fail);
  EXPECT_CONTAINS(missing.message, "no sample series 'samples.step_cpu_time' (available: ");
  EXPECT_CONTAINS(missing.message, "samples.step_time");
}

TEST(GateEval, AnExpectedFailureHasNothingToMeasure) {
  RunReport report = sample_report();
  sample_variant(report, "resume_rebuild/foreach").expected_failure = "a known crash";
  const GateFile gate = parse_gate_json(
      {{"gate_version", 1},
       {"rules", json::array({on("resume_rebuild/foreach", "status.ok", {{"equals", true}}),
                              on("resume_rebuild/foreach", "per_step.d2h.count", {{"max", 0}}),
                              on("resume_rebuild/foreach", "correctness.passed",
                                 {{"equals", true}})})}},
      "g");
  const GateOutcome g = evaluate_gate(gate, report, nullptr);
  ASSERT_EQ(g.outcomes.size(), 3u);
  EXPECT_EQ(g.outcomes[0].status, RuleStatus::Fail);  // it did not run: a gate can insist
  EXPECT_EQ(g.outcomes[1].status, RuleStatus::Skipped);
  EXPECT_CONTAINS(g.outcomes[1].message, "reproduces a known failure (a known crash)");
  EXPECT_EQ(g.outcomes[2].status, RuleStatus::Skipped);
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

TEST(GateEval, ABaselineTimeRuleNeedsProcessesApart) {
  const RunReport base = with_step_times(kFast, kFast);
  const RunReport slower = with_step_times(kSlow, kFast);
  // By default 3 processes a side: reports of one process each cannot decide a time between runs.
  const json r = mann_whitney("fresh/foreach", {{"baseline", true}});
  const GateFile gate = parse_gate_json({{"gate_version", 1}, {"rules", json::array({r})}}, "g");
  const RuleOutcome o = only(evaluate_gate(gate, slower, &base));
  EXPECT_EQ(o.status, RuleStatus::Inconclusive) << o.message;
  EXPECT_CONTAINS(o.message, "fewer than min_processes 3");
  // A within-run rule (relative_to) is not between runs: no processes needed.
  EXPECT_THROW(parse_gate_json({{"gate_version", 1},
                                {"rules", json::array({mann_whitney(
                                              "fresh/foreach", {{"relative_to", "fresh/forloop"},
                                                                {"min_processes", 2}})})}},
                               "g"),
               InputError);
}

// What bench runs and compares: the gate may name only what the tool knows, and a rule for what
// the run left out fails unless allowed.
TEST(GateEval, WithACatalogATypoIsBadInputAndWhatTheRunLeftOutFails) {
  const RunReport report = sample_report();
  GateCatalog catalog;
  add_to_catalog(catalog, report);
  catalog["fused_adam"] = {"fresh/fused", "resumed_move_all/fused"};
  catalog["resume_adam"].push_back("resume_extra/foreach");  // a variant the run filtered out
  auto gate = [](const json& rules) {
    return parse_gate_json({{"gate_version", 1}, {"rules", rules}}, "g.json");
  };
  // A scenario nobody knows, a variant pattern that matches none: InputError, naming the rule.
  json typo = on("fresh/foreach", "per_step.d2h.count", {{"max", 0}});
  typo["scenario"] = "resume_adamm";
  try {
    check_gate_names(gate(json::array({typo})), catalog);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(std::string(e.what()), "scenario 'resume_adamm' matches no scenario");
    EXPECT_CONTAINS(std::string(e.what()), "rules[0]");
  }
  EXPECT_THROW(check_gate_names(gate(json::array({on("resume_move_al/*", "per_step.d2h.count",
                                                     {{"max", 0}})})),
                                catalog),
               InputError);
  // Known, matched: fine. A glob applies to what ran; an exact name the run left out is missing.
  json fused = on("*/fused", "per_step.d2h.count", {{"max", 1e9}});
  fused["scenario"] = "fused_adam";
  const GateFile good = gate(json::array({on("fresh/*", "per_step.d2h.count", {{"max", 1e9}}),
                                          fused,
                                          on("resume_extra/foreach", "per_step.d2h.count",
                                             {{"max", 1e9}})}));
  EXPECT_NO_THROW(check_gate_names(good, catalog));
  // fused_adam was not run, resume_extra/foreach was filtered out: each fails...
  GateOutcome g = evaluate_gate(good, report, nullptr, GateScope{&catalog, false});
  size_t failed = 0;
  for (const RuleOutcome& o : g.outcomes) {
    if (o.status != RuleStatus::Fail) continue;
    ++failed;
    EXPECT_CONTAINS(o.message, "is not in the run: a gate passes only on what was counted");
  }
  EXPECT_EQ(failed, 2u);
  EXPECT_FALSE(g.passed());
  // ...and is skipped with allow_missing, where what ran decides.
  g = evaluate_gate(good, report, nullptr, GateScope{&catalog, true});
  EXPECT_EQ(g.count(RuleStatus::Fail), 0u);
  EXPECT_EQ(g.count(RuleStatus::Skipped), 2u);
  EXPECT_TRUE(g.passed());
}

}  // namespace
}  // namespace harness
