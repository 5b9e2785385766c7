// Gate files: valid rules parse into the right kinds; every malformed thing is an InputError that
// names the file, the rule and the problem.
#include <gtest/gtest.h>

#include <filesystem>

#include "harness/report/gates/gate.h"
#include "harness/report/model/pattern.h"
#include "test_support.h"

namespace harness {
namespace {

using nlohmann::json;

json gate_with(const json& r) { return {{"gate_version", 1}, {"rules", json::array({r})}}; }

// A rule on fresh/foreach's per_step.d2h.count with `extra` keys added or replaced.
json rule(const json& extra) {
  json r = {{"name", "d2h guard"},
            {"scenario", "resume_adam"},
            {"variant", "fresh/foreach"},
            {"metric", "per_step.d2h.count"}};
  if (!extra.is_null()) r.update(extra);
  return r;
}

std::string parse_error(const json& gate) {
  return input_error([&] { parse_gate_json(gate, "gates/ci.json"); });
}

// The error for a gate with this one rule names the file, the rule and `problem`.
void expect_rule_error(const json& r, const std::string& problem) {
  const std::string message = parse_error(gate_with(r));
  EXPECT_CONTAINS(message, "gate file 'gates/ci.json'");
  EXPECT_CONTAINS(message, "rules[0]");
  EXPECT_CONTAINS(message, problem);
}

TEST(GateParse, ValidRulesOfEveryKind) {
  const json gate = {
      {"gate_version", 1},
      {"description", "CI thresholds"},
      {"rules",
       {rule({{"max", 0}}),
        rule({{"variant", "resume_keep_step/*"}, {"relative_to", "fresh/*"}}),
        rule({{"variant", "*"}, {"baseline", true}, {"max_ratio", 1.5}}),
        {{"scenario", "*"}, {"variant", "*"}, {"metric", "status.ok"}, {"equals", true}},
        rule({{"metric", "timing.step_time.median"}, {"baseline", true}, {"min_samples", 5}})}}};
  const GateFile g = parse_gate_json(gate, "gates/ci.json");
  EXPECT_EQ(g.source, "gates/ci.json");
  EXPECT_EQ(g.description, "CI thresholds");
  ASSERT_EQ(g.rules.size(), 5u);
  EXPECT_EQ(g.rules[0].kind, RuleKind::Absolute);
  EXPECT_EQ(g.rules[0].max, 0.0);
  EXPECT_FALSE(g.rules[0].min);
  EXPECT_EQ(g.rules[1].kind, RuleKind::Relative);
  EXPECT_EQ(g.rules[1].relative_to, "fresh/*");
  EXPECT_EQ(g.rules[1].max_ratio, 1.0);
  EXPECT_EQ(g.rules[2].kind, RuleKind::Baseline);
  EXPECT_EQ(g.rules[2].max_ratio, 1.5);
  EXPECT_EQ(g.rules[3].kind, RuleKind::Equals);
  EXPECT_EQ(g.rules[3].name, "rules[3]");
  EXPECT_EQ(g.rules[4].min_samples, 5);
  EXPECT_EQ(g.rules[4].index, 4u);
}

TEST(GateParse, FileErrors) {
  TempDir dir;
  EXPECT_CONTAINS(input_error([&] { parse_gate_file(dir.path("absent.json")); }),
                  "cannot read gate file '" + dir.path("absent.json") + "'");
  write_text(dir.path("bad.json"), "{\"gate_version\": 1,\n \"rules\": [,]}");
  const std::string message = input_error([&] { parse_gate_file(dir.path("bad.json")); });
  EXPECT_CONTAINS(message, "bad.json' is not valid JSON");
  EXPECT_CONTAINS(message, "line 2");
  // A number JSON cannot hold is bad input too, not an internal error.
  write_text(dir.path("huge.json"),
             "{\"gate_version\": 1, \"rules\": [{\"scenario\": \"s\", \"variant\": \"v\", "
             "\"metric\": \"per_step.sync.count\", \"max\": 1e400}]}");
  EXPECT_CONTAINS(input_error([&] { parse_gate_file(dir.path("huge.json")); }),
                  "huge.json' is not valid JSON: [json.exception.out_of_range.406] number overflow");
  write_text(dir.path("ok.json"), gate_with(rule({{"max", 1}})).dump());
  EXPECT_EQ(parse_gate_file(dir.path("ok.json")).rules.size(), 1u);
}

TEST(GateParse, TopLevelErrors) {
  EXPECT_CONTAINS(parse_error(json::array()), "expected a JSON object");
  EXPECT_CONTAINS(parse_error({{"gate_version", 1}}), "missing 'rules'");
  EXPECT_CONTAINS(parse_error({{"rules", json::array({rule({{"max", 0}})})}}),
                  "missing 'gate_version'");
  EXPECT_CONTAINS(parse_error({{"gate_version", 2}, {"rules", json::array()}}),
                  "unsupported gate_version 2");
  EXPECT_CONTAINS(parse_error({{"gate_version", "1"}, {"rules", json::array()}}),
                  "unsupported gate_version \"1\"");
  EXPECT_CONTAINS(parse_error({{"gate_version", 1}, {"rules", json::array()}}), "'rules' is empty");
  EXPECT_CONTAINS(parse_error({{"gate_version", 1}, {"rules", json::object()}}),
                  "'rules' must be an array");
  EXPECT_CONTAINS(parse_error({{"gate_version", 1}, {"rule", json::array()}}),
                  "unknown key 'rule'");
}

TEST(GateParse, RuleErrors) {
  expect_rule_error(rule({{"maxx", 4}}), "unknown key 'maxx'");
  EXPECT_CONTAINS(parse_error(gate_with(rule({{"maxx", 4}}))), "(\"d2h guard\")");
  expect_rule_error(json::array(), "expected an object");
  expect_rule_error(rule({{"max", "4"}}), "'max' must be a number, got \"4\"");
  expect_rule_error(rule({{"max", 1}, {"scenario", 3}}), "'scenario' must be a non-empty string");
  expect_rule_error(rule({{"baseline", "yes"}}), "'baseline' must be true or false");
  expect_rule_error(rule({{"baseline", false}}), "'baseline' must be true when given");
  expect_rule_error(rule({}), "no comparison given");
  expect_rule_error(rule({{"max", 1}, {"metric", "status.ok"}, {"equals", true}}),
                    "not both 'max' and 'equals'");
  expect_rule_error(rule({{"max", 1}, {"relative_to", "fresh/foreach"}}),
                    "not both 'max' and 'relative_to'");
  expect_rule_error(rule({{"relative_to", "fresh/foreach"}, {"max_ratio", -0.5}}),
                    "'max_ratio' must be >= 0, got -0.5");
  expect_rule_error(rule({{"max", 1}, {"max_ratio", 2}}), "'max_ratio' applies only to");
  expect_rule_error(rule({{"min", 5}, {"max", 1}}), "'min' is greater than 'max'");
  json no_metric = rule({{"max", 1}});
  no_metric.erase("metric");
  expect_rule_error(no_metric, "missing 'metric'");
}

TEST(GateParse, MetricErrors) {
  expect_rule_error(rule({{"metric", "d2h.count"}, {"max", 1}}),
                    "'d2h.count' is not a metric path");
  expect_rule_error(rule({{"metric", "phase[optimizer.step]"}, {"max", 1}}), "not a metric path");
  expect_rule_error(rule({{"equals", true}}), "'equals' applies only to the metrics");
  expect_rule_error(rule({{"metric", "correctness.passed"}, {"max", 1}}),
                    "compare it with 'equals'");
  expect_rule_error(rule({{"metric", "status.ok"}, {"equals", true}, {"min_samples", 3}}),
                    "'min_samples' does not apply");
  expect_rule_error(rule({{"max", 1}, {"min_samples", 0}}),
                    "'min_samples' must be an integer >= 1");
  EXPECT_NO_THROW(parse_gate_json(
      gate_with(rule({{"metric", "phase[optimizer.step].sync.count"}, {"max", 0}})), "g"));
}

TEST(GateParse, StatisticalRuleDefaultsAndErrors) {
  const json steps = {{"metric", "samples.step_time"}, {"test", "mann_whitney_u"}};
  json baseline = rule(steps);
  baseline["baseline"] = true;
  const GateRule r = parse_gate_json(gate_with(baseline), "g").rules.at(0);
  EXPECT_TRUE(r.statistical);
  EXPECT_EQ(r.kind, RuleKind::Baseline);
  EXPECT_DOUBLE_EQ(r.max_ratio, 1.10);
  EXPECT_DOUBLE_EQ(r.alpha, 0.01);
  EXPECT_EQ(r.min_samples, 10);
  baseline.update({{"alpha", 0.05}, {"max_ratio", 1.2}, {"min_samples", 20}});
  const GateRule tuned = parse_gate_json(gate_with(baseline), "g").rules.at(0);
  EXPECT_DOUBLE_EQ(tuned.alpha, 0.05);
  EXPECT_DOUBLE_EQ(tuned.max_ratio, 1.2);
  EXPECT_EQ(tuned.min_samples, 20);

  json relative = rule(steps);
  relative["relative_to"] = "fresh/forloop";
  EXPECT_NO_THROW(parse_gate_json(gate_with(relative), "g"));

  expect_rule_error(rule({{"metric", "samples.step_time"}, {"test", "t_test"}, {"baseline", true}}),
                    "unknown 'test' \"t_test\" (known: mann_whitney_u)");
  expect_rule_error(rule({{"metric", "samples.step_time"}, {"test", "mann_whitney_u"}, {"max", 1}}),
                    "give 'relative_to' or 'baseline': true");
  expect_rule_error(
      rule({{"metric", "timing.step_time.median"}, {"test", "mann_whitney_u"}, {"baseline", true}}),
      "needs a sample series: metric samples.<name>");
  expect_rule_error(rule({{"metric", "samples.step_time"}, {"baseline", true}}),
                    "is a series of times: compare it with \"test\"");
  expect_rule_error(rule({{"baseline", true}, {"alpha", 0.05}}), "'alpha' applies only to rules with a 'test'");
  json bad_alpha = baseline;
  bad_alpha["alpha"] = 1.5;
  expect_rule_error(bad_alpha, "'alpha' must be in (0, 1), got 1.5");
}

TEST(GateParse, RelativeToWildcardsMustMatchTheVariant) {
  expect_rule_error(rule({{"relative_to", "fresh/*"}}), "has 1 '*' but 'variant'");
  expect_rule_error(rule({{"variant", "*/*"}, {"relative_to", "fresh/*"}}), "has 2");
  EXPECT_NO_THROW(
      parse_gate_json(gate_with(rule({{"variant", "*"}, {"relative_to", "fresh/foreach"}})), "g"));
}

TEST(GateParse, BaselineTimeRuleNeedsMinSamples) {
  expect_rule_error(rule({{"metric", "timing.step_time.median"}, {"baseline", true}}),
                    "give 'min_samples'");
  EXPECT_NO_THROW(parse_gate_json(
      gate_with(rule({{"metric", "timing.step_time.count"}, {"baseline", true}})), "g"));
}

TEST(GateParse, CheckedInGateFilesParse) {
  size_t files = 0;
  const std::string gates_dir = source_path("reports/gates");
  for (const auto& entry : std::filesystem::directory_iterator(gates_dir)) {
    if (entry.path().extension() != ".json") continue;
    ++files;
    EXPECT_NO_THROW(parse_gate_file(entry.path().string())) << entry.path();
  }
  EXPECT_GT(files, 0u) << "no gate files in " << gates_dir;
}

TEST(Pattern, GlobWithCaptures) {
  std::vector<std::string> captures;
  EXPECT_TRUE(glob_match("resume_keep_step/*", "resume_keep_step/foreach", &captures));
  EXPECT_EQ(captures, std::vector<std::string>{"foreach"});
  EXPECT_TRUE(glob_match("*/*", "resume/a/b", &captures));
  EXPECT_EQ(captures, (std::vector<std::string>{"resume", "a/b"}));
  EXPECT_TRUE(glob_match("fresh/foreach", "fresh/foreach"));
  EXPECT_FALSE(glob_match("fresh/foreach", "fresh/forloop"));
  EXPECT_FALSE(glob_match("fresh/*", "resume/foreach"));
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_EQ(substitute_wildcards("fresh/*", {"foreach"}), "fresh/foreach");
  EXPECT_EQ(wildcard_count("*/x/*"), 2u);
}

}  // namespace
}  // namespace harness
