// Evaluating a gate on a report: which variants each rule applies to, what it compares them with,
// and the outcome of each comparison.
#include <algorithm>
#include <cmath>

#include "harness/errors.h"
#include "harness/report/text/format.h"
#include "harness/report/gates/gate.h"
#include "harness/report/model/pattern.h"
#include "harness/report/compare/site_diff.h"
#include "harness/report/compare/statistics.h"

namespace harness {
namespace {

// Relative slack for floating-point rounding in "ratio x value" limits (1.15 x 100 is 114.999...).
constexpr double kRoundingSlack = 1e-9;
constexpr size_t kNamesListed = 8;
const char* const kSampleCount = "timing.step_time.count";

std::string list_names(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < kNamesListed; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > kNamesListed) {
    out += ", ... (" + std::to_string(names.size() - kNamesListed) + " more)";
  }
  return names.empty() ? "none" : out;
}

// A few metric paths of the variant, preferring those in the same section as `wanted`.
std::string available_metrics(const VariantResult& variant, const std::string& wanted) {
  const std::string section = wanted.substr(0, wanted.find_first_of(".]") + 1);
  std::vector<std::string> all = metric_paths(variant), same;
  for (const auto& path : all) {
    if (path.compare(0, section.size(), section) == 0) same.push_back(path);
  }
  return list_names(same.empty() ? all : same);
}

// The value of a metric, or why there is none.
struct Lookup {
  std::optional<double> value;
  std::string unit;
  std::string problem;
};

Lookup lookup(const VariantResult& variant, const std::string& metric) {
  const Measurement* m = find_metric(variant, metric);
  if (m == nullptr) {
    return {
        std::nullopt, "",
        "unknown metric '" + metric + "' (available: " + available_metrics(variant, metric) + ")"};
  }
  if (!m->value || !std::isfinite(*m->value)) {
    return {std::nullopt, m->unit, "metric '" + metric + "' was not measured (null)"};
  }
  return {m->value, m->unit, ""};
}

// Empty when `variant` has at least `min_samples` timed steps, else why not.
std::string too_few_samples(const VariantResult& variant, int64_t min_samples,
                            const std::string& whose) {
  const Lookup samples = lookup(variant, kSampleCount);
  const double count = samples.value.value_or(0.0);
  if (count >= static_cast<double>(min_samples)) return "";
  return whose + " has " + format_number(count) + " timed steps (" + kSampleCount +
         "), the rule needs min_samples " + std::to_string(min_samples);
}

// Names a rule the way the parser does: "gate file 'f.json': rules[3] ("name")".
std::string rule_context(const GateFile& gate, const GateRule& rule) {
  const std::string index = "rules[" + std::to_string(rule.index) + "]";
  return "gate file '" + gate.source + "': " + index +
         (rule.name == index ? "" : " (\"" + rule.name + "\")");
}

RuleOutcome outcome(const GateRule& rule, const std::string& scenario, const std::string& variant) {
  RuleOutcome out;
  out.rule = rule.name;
  out.scenario = scenario;
  out.variant = variant;
  out.metric = rule.metric;
  return out;
}

RuleOutcome finish(RuleOutcome out, RuleStatus status, std::string message) {
  out.status = status;
  out.message = std::move(message);
  return out;
}

// The sites behind a metric of capture blockers, graph breaks or recompilations, in a line:
// "2/step at train.py:42 in step (aten::_local_scalar_dense, item) in train.step; ...".
// "" for another metric, or where the variant has no such site.
std::string lines_of(const VariantResult& v, const std::string& metric) {
  std::vector<SiteRow> rows;
  if (ends_with(metric, "capture.blockers")) {
    for (SiteRow& r : site_rows(v)) {
      if (r.sync || r.what.rfind("pageable", 0) == 0) rows.push_back(std::move(r));
    }
  }
  for (SiteRow& r : event_rows(v)) {
    if ((ends_with(metric, "capture.blockers") && r.event == kCaptureBlocker) ||
        (ends_with(metric, "graph_break.count") && r.event == kGraphBreak) ||
        (ends_with(metric, "recompile.count") && r.event == kRecompile)) {
      rows.push_back(std::move(r));
    }
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const SiteRow& a, const SiteRow& b) { return a.per_step > b.per_step; });
  constexpr size_t kShown = 5;
  std::string out;
  for (size_t i = 0; i < rows.size() && i < kShown; ++i) {
    const SiteRow& r = rows[i];
    out += (i ? "; " : "") + format_number(r.per_step) + "/step " +
           site_family(r.sync, r.event) + " at " + describe_where(r) + " (" + r.what + ") in " +
           r.phase;
  }
  if (rows.size() > kShown) out += "; and " + std::to_string(rows.size() - kShown) + " more";
  return out;
}

RuleOutcome evaluate_equals(const GateRule& rule, const VariantResult& variant, RuleOutcome out) {
  const char* const names[] = {"false", "true"};
  bool actual = variant.ran;
  std::string detail = variant.error;
  if (rule.metric == kCorrectnessPassed) {
    if (variant.failed_as_expected()) {
      return finish(out, RuleStatus::Skipped, "expected failure: " + variant.expected_failure);
    }
    if (!variant.ran) {
      return finish(out, RuleStatus::Fail, "variant failed to run: " + variant.error);
    }
    if (!variant.correctness.checked) {
      return finish(out, RuleStatus::Skipped, "variant has no correctness check");
    }
    actual = variant.correctness.passed;
    detail = variant.correctness.detail;
  }
  out.actual = actual ? 1.0 : 0.0;
  out.allowed = std::string("== ") + names[rule.equals];
  const bool pass = actual == rule.equals;
  std::string message = std::string("actual ") + names[actual] + (pass ? " == " : " != ") +
                        "expected " + names[rule.equals];
  if (!pass && !detail.empty()) message += ": " + detail;
  return finish(out, pass ? RuleStatus::Pass : RuleStatus::Fail, message);
}

// Evaluates one rule on one variant; `captures` are what the rule's variant '*'s matched.
class VariantCheck {
 public:
  VariantCheck(const GateFile& gate, const GateRule& rule, const Provenance& run,
               const ScenarioResult& scenario, const VariantResult& variant,
               const RunReport* baseline)
      : gate_(gate),
        rule_(rule),
        run_(run),
        scenario_(scenario),
        variant_(variant),
        baseline_(baseline) {}

  RuleOutcome run(const std::vector<std::string>& captures) const {
    RuleOutcome out = outcome(rule_, scenario_.name, variant_.name);
    if (rule_.kind == RuleKind::Equals) return evaluate_equals(rule_, variant_, out);
    if (variant_.failed_as_expected()) {
      return finish(out, RuleStatus::Skipped,
                    "reproduces a known failure (" + variant_.expected_failure +
                        "): nothing measured");
    }
    if (!variant_.ran) {
      return finish(out, RuleStatus::Fail, "variant failed to run: " + variant_.error);
    }
    if (rule_.statistical) return statistical(out, captures);
    if (rule_.metric == kNewSyncSites || rule_.metric == kNewCopySites) return new_sites(out);
    const Lookup actual = lookup(variant_, rule_.metric);
    if (!actual.value) return finish(out, RuleStatus::Fail, actual.problem);
    out.actual = actual.value;
    if (rule_.kind == RuleKind::Baseline && actual.unit == "ns" && !rule_.min_samples) {
      throw InputError(rule_context(gate_, rule_) + ": compares a time (" + rule_.metric +
                       ", in ns) with a baseline: give 'min_samples'");
    }
    if (rule_.min_samples) {
      std::string problem = too_few_samples(variant_, *rule_.min_samples, "variant");
      if (!problem.empty()) return finish(out, RuleStatus::Fail, problem);
    }
    switch (rule_.kind) {
      case RuleKind::Absolute: return with_lines(compare(out, rule_.min, rule_.max, ""));
      case RuleKind::Relative: return with_lines(relative(out, captures));
      case RuleKind::Baseline: return with_lines(against_baseline(out));
      case RuleKind::Equals: break;
    }
    return out;
  }

 private:
  std::string reference_name(const std::vector<std::string>& captures) const {
    return wildcard_count(rule_.relative_to) == 0
               ? rule_.relative_to
               : substitute_wildcards(rule_.relative_to, captures);
  }

  // A failed rule on capture blockers, graph breaks or recompilations names their lines (the
  // variant's sites of that kind, the most frequent first).
  RuleOutcome with_lines(RuleOutcome out) const {
    if (out.status != RuleStatus::Fail) return out;
    const std::string lines = lines_of(variant_, rule_.metric);
    if (!lines.empty()) out.message += "; at " + lines;
    return out;
  }

  // A sites rule: the sites of the variant that the baseline's has not, by line.
  RuleOutcome new_sites(RuleOutcome out) const {
    const ScenarioResult* scenario = find_scenario(*baseline_, scenario_.name);
    const VariantResult* base = scenario ? find_variant(*scenario, variant_.name) : nullptr;
    if (base == nullptr) return finish(out, RuleStatus::Skipped, "not in the baseline report");
    if (!base->ran) {
      return finish(out, RuleStatus::Skipped, "failed to run in the baseline: " + base->error);
    }
    const bool sync = rule_.metric == kNewSyncSites;
    std::string added;
    int n = 0;
    for (const SiteChange& c : diff_variant_sites(scenario_.name, *base, variant_)) {
      if (c.kind != SiteChange::Added || c.sync != sync || !c.event.empty()) continue;
      added += (n++ ? "; " : "") + describe(c);
    }
    out.actual = n;
    out.allowed = "no site the baseline has not";
    if (n == 0) return finish(out, RuleStatus::Pass, "no new site");
    return finish(out, RuleStatus::Fail,
                  std::to_string(n) + " new " + (sync ? "sync" : "copy") + " site" +
                      (n == 1 ? "" : "s") + ": " + added);
  }

  // A "test" rule: the variant's sample series against the reference's or the baseline's.
  RuleOutcome statistical(RuleOutcome out, const std::vector<std::string>& captures) const {
    const std::vector<double>* head = find_samples(variant_, rule_.metric);
    if (head == nullptr) {
      return finish(out, RuleStatus::Fail,
                    "no sample series '" + rule_.metric + "' (available: " +
                        available_metrics(variant_, rule_.metric) + ")");
    }
    const std::vector<double>* base = nullptr;
    std::string of;
    if (rule_.kind == RuleKind::Relative) {
      of = reference_name(captures);
      const VariantResult* reference = find_variant(scenario_, of);
      if (reference == nullptr || !reference->ran) {
        return finish(out, RuleStatus::Fail,
                      "reference variant '" + of + "' " +
                          (reference ? "failed to run: " + reference->error
                                     : "is not in scenario '" + scenario_.name + "'"));
      }
      base = find_samples(*reference, rule_.metric);
      if (base == nullptr) {
        return finish(out, RuleStatus::Fail, "reference " + of + " has no '" + rule_.metric + "'");
      }
    } else {
      of = "baseline";
      const ScenarioResult* scenario = find_scenario(*baseline_, scenario_.name);
      const VariantResult* v = scenario ? find_variant(*scenario, variant_.name) : nullptr;
      if (v == nullptr) return finish(out, RuleStatus::Skipped, "not in the baseline report");
      if (!v->ran) {
        return finish(out, RuleStatus::Skipped, "failed to run in the baseline: " + v->error);
      }
      base = find_samples(*v, rule_.metric);
      if (base == nullptr) {
        return finish(out, RuleStatus::Inconclusive,
                      "the baseline has no '" + rule_.metric +
                          "' (reports before schema 1.2 keep no samples)");
      }
    }
    TimeTestOptions options;
    options.alpha = rule_.alpha;
    options.max_ratio = rule_.max_ratio;
    options.min_samples = static_cast<size_t>(rule_.min_samples.value_or(10));
    options.min_processes = static_cast<size_t>(rule_.min_processes.value_or(3));
    // Between runs, as bench compare: the processes of both sides must be apart too.
    std::optional<ProcessCounts> between_runs;
    if (rule_.kind == RuleKind::Baseline) {
      const ScenarioResult* s = find_scenario(*baseline_, scenario_.name);
      const VariantResult* v = s ? find_variant(*s, variant_.name) : nullptr;
      between_runs = ProcessCounts{static_cast<size_t>(variant_.processes),
                                   static_cast<size_t>(v ? v->processes : 1)};
    }
    const TimeComparison c = compare_times(*head, *base, options, between_runs);
    if (c.ratio.ratio) out.actual = c.ratio.ratio;
    out.allowed = "not slower than " + format_ratio(rule_.max_ratio) + " x " + of +
                  " at p < " + format_number(rule_.alpha);
    const std::string message = c.reason + " (" + of + ")";
    if (rule_.kind == RuleKind::Baseline) {
      // As bench compare: times of an oversubscribed scenario say nothing between runs, and a
      // slowdown measured while other work held the cores may be that load.
      const ScenarioResult* base_scenario = find_scenario(*baseline_, scenario_.name);
      std::string why = oversubscription(run_, scenario_.world_size);
      if (why.empty() && base_scenario) {
        why = oversubscription(baseline_->provenance, base_scenario->world_size);
      }
      if (!why.empty()) return finish(out, RuleStatus::Inconclusive, why + "; " + message);
      const VariantResult* base_variant =
          base_scenario ? find_variant(*base_scenario, variant_.name) : nullptr;
      why = contention(variant_);
      if (why.empty() && base_variant && !contention(*base_variant).empty()) {
        why = "baseline: " + contention(*base_variant);
      }
      if (c.verdict == TimeVerdict::Regression && why.empty() && base_variant &&
          c.ratio.ratio) {
        why = machine_drift(*c.ratio.ratio, machine_probe_samples(variant_),
                            machine_probe_samples(*base_variant), options);
      }
      if (c.verdict == TimeVerdict::Regression && !why.empty()) {
        return finish(out, RuleStatus::Inconclusive, why + "; " + message);
      }
    }
    switch (c.verdict) {
      case TimeVerdict::Regression: return finish(out, RuleStatus::Fail, message);
      case TimeVerdict::Inconclusive: return finish(out, RuleStatus::Inconclusive, message);
      case TimeVerdict::Improvement:
      case TimeVerdict::Unchanged: break;
    }
    return finish(out, RuleStatus::Pass, message);
  }

  RuleOutcome relative(RuleOutcome out, const std::vector<std::string>& captures) const {
    const std::string name = reference_name(captures);
    const VariantResult* reference = find_variant(scenario_, name);
    if (reference == nullptr) {
      return finish(out, RuleStatus::Fail,
                    "reference variant '" + name + "' is not in scenario '" + scenario_.name + "'");
    }
    if (!reference->ran) {
      return finish(out, RuleStatus::Fail,
                    "reference variant '" + name + "' failed to run: " + reference->error);
    }
    const Lookup ref = lookup(*reference, rule_.metric);
    if (!ref.value) return finish(out, RuleStatus::Fail, "reference " + name + ": " + ref.problem);
    if (rule_.min_samples) {
      std::string problem = too_few_samples(*reference, *rule_.min_samples, "reference " + name);
      if (!problem.empty()) return finish(out, RuleStatus::Fail, problem);
    }
    return compare(out, std::nullopt, rule_.max_ratio * *ref.value, ratio_note(*ref.value, name));
  }

  RuleOutcome against_baseline(RuleOutcome out) const {
    const ScenarioResult* scenario = find_scenario(*baseline_, scenario_.name);
    const VariantResult* base = scenario ? find_variant(*scenario, variant_.name) : nullptr;
    if (base == nullptr) return finish(out, RuleStatus::Skipped, "not in the baseline report");
    if (!base->ran) {
      return finish(out, RuleStatus::Skipped, "failed to run in the baseline: " + base->error);
    }
    const Lookup ref = lookup(*base, rule_.metric);
    if (!ref.value) return finish(out, RuleStatus::Skipped, "baseline: " + ref.problem);
    if (rule_.min_samples) {
      std::string problem = too_few_samples(*base, *rule_.min_samples, "baseline");
      if (!problem.empty()) return finish(out, RuleStatus::Skipped, problem);
    }
    return compare(out, std::nullopt, rule_.max_ratio * *ref.value,
                   ratio_note(*ref.value, "baseline"));
  }

  std::string ratio_note(double reference, const std::string& of) const {
    return " (" + format_ratio(rule_.max_ratio) + " x " + format_number(reference) + " of " + of +
           ")";
  }

  // Checks out.actual against the limits; `note` says where a limit came from.
  static RuleOutcome compare(RuleOutcome out, std::optional<double> min, std::optional<double> max,
                             const std::string& note) {
    const double actual = *out.actual;
    const std::string a = "actual " + format_number(actual);
    if (min && max) {
      out.allowed = "in [" + format_number(*min) + ", " + format_number(*max) + "]";
    } else {
      out.allowed = min ? ">= " + format_number(*min) : "<= " + format_number(*max) + note;
    }
    if (min && actual < *min - kRoundingSlack * std::fabs(*min)) {
      return finish(out, RuleStatus::Fail, a + " < minimum " + format_number(*min) + note);
    }
    if (max && actual > *max + kRoundingSlack * std::fabs(*max)) {
      return finish(out, RuleStatus::Fail, a + " > allowed " + format_number(*max) + note);
    }
    return finish(out, RuleStatus::Pass,
                  a + (max ? " <= allowed " + format_number(*max) + note
                           : " >= minimum " + format_number(*min)));
  }

  const GateFile& gate_;
  const GateRule& rule_;
  const Provenance& run_;
  const ScenarioResult& scenario_;
  const VariantResult& variant_;
  const RunReport* baseline_;
};

std::vector<std::string> names_of(const std::vector<ScenarioResult>& list) {
  std::vector<std::string> names;
  for (const auto& s : list) names.push_back(s.name);
  return names;
}
std::vector<std::string> names_of(const std::vector<VariantResult>& list) {
  std::vector<std::string> names;
  for (const auto& v : list) names.push_back(v.name);
  return names;
}

std::vector<std::string> matching(const std::string& pattern,
                                  const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const std::string& n : names) {
    if (glob_match(pattern, n)) out.push_back(n);
  }
  return out;
}

// A scenario or variant the rule names and the catalog knows, but the run left out (`absence`
// says so: "scenario x is not in the run").
RuleOutcome missing(const GateRule& rule, const std::string& scenario, const std::string& variant,
                    const std::string& absence, bool allow_missing) {
  return finish(outcome(rule, scenario, variant),
                allow_missing ? RuleStatus::Skipped : RuleStatus::Fail,
                absence +
                    (allow_missing ? " (--allow-missing)"
                                   : ": a gate passes only on what was counted (--allow-missing "
                                     "skips rules for what a run leaves out)"));
}

// Without a catalog: what the report has decides; a pattern that matches nothing is skipped.
void evaluate_rule_on_report(const GateFile& gate, const GateRule& rule, const RunReport& report,
                             const RunReport* baseline, std::vector<RuleOutcome>& outcomes) {
  bool any_scenario = false;
  for (const auto& scenario : report.scenarios) {
    if (!glob_match(rule.scenario, scenario.name)) continue;
    any_scenario = true;
    bool any_variant = false;
    for (const auto& variant : scenario.variants) {
      std::vector<std::string> captures;
      if (!glob_match(rule.variant, variant.name, &captures)) continue;
      any_variant = true;
      outcomes.push_back(
          VariantCheck(gate, rule, report.provenance, scenario, variant, baseline).run(captures));
    }
    if (!any_variant) {
      outcomes.push_back(finish(outcome(rule, scenario.name, rule.variant), RuleStatus::Skipped,
                                "no variant matches '" + rule.variant + "' (variants: " +
                                    list_names(names_of(scenario.variants)) + ")"));
    }
  }
  if (!any_scenario) {
    outcomes.push_back(finish(outcome(rule, rule.scenario, rule.variant), RuleStatus::Skipped,
                              "no scenario in the report matches '" + rule.scenario +
                                  "' (scenarios: " + list_names(names_of(report.scenarios)) + ")"));
  }
}

// With a catalog (see GateScope): each variant of the run the rule matches is checked. What the
// rule names exactly (no '*') and the catalog knows, but the run left out, is missing; and a rule
// that matched nothing in the run is missing as a whole: a gate passes only on what was counted.
void evaluate_rule_in_scope(const GateFile& gate, const GateRule& rule, const RunReport& report,
                            const RunReport* baseline, const GateScope& scope,
                            std::vector<RuleOutcome>& outcomes) {
  const size_t before = outcomes.size();
  const GateCatalog& catalog = *scope.catalog;
  for (const auto& scenario : report.scenarios) {
    if (!glob_match(rule.scenario, scenario.name)) continue;
    for (const auto& variant : scenario.variants) {
      std::vector<std::string> captures;
      if (!glob_match(rule.variant, variant.name, &captures)) continue;
      outcomes.push_back(
          VariantCheck(gate, rule, report.provenance, scenario, variant, baseline).run(captures));
    }
    auto known = catalog.find(scenario.name);
    const bool variant_known =
        known != catalog.end() &&
        std::find(known->second.begin(), known->second.end(), rule.variant) != known->second.end();
    if (wildcard_count(rule.variant) == 0 && variant_known &&
        find_variant(scenario, rule.variant) == nullptr) {
      outcomes.push_back(missing(rule, scenario.name, rule.variant,
                                 "variant " + rule.variant + " is not in the run",
                                 scope.allow_missing));
    }
  }
  if (wildcard_count(rule.scenario) == 0 && find_scenario(report, rule.scenario) == nullptr &&
      catalog.count(rule.scenario) > 0) {
    outcomes.push_back(missing(rule, rule.scenario, rule.variant,
                               "scenario " + rule.scenario + " is not in the run",
                               scope.allow_missing));
  }
  if (outcomes.size() == before) {
    outcomes.push_back(missing(rule, rule.scenario, rule.variant,
                               "the run has no scenario or variant the rule names (scenario '" +
                                   rule.scenario + "', variant '" + rule.variant + "')",
                               scope.allow_missing));
  }
}

void evaluate_rule(const GateFile& gate, const GateRule& rule, const RunReport& report,
                   const RunReport* baseline, const GateScope& scope,
                   std::vector<RuleOutcome>& outcomes) {
  if (scope.catalog == nullptr) {
    evaluate_rule_on_report(gate, rule, report, baseline, outcomes);
  } else {
    evaluate_rule_in_scope(gate, rule, report, baseline, scope, outcomes);
  }
}

}  // namespace

const char* to_string(RuleStatus status) {
  switch (status) {
    case RuleStatus::Pass: return "PASS";
    case RuleStatus::Fail: return "FAIL";
    case RuleStatus::Skipped: return "SKIP";
    case RuleStatus::Inconclusive: return "INCONCLUSIVE";
  }
  return "?";
}

size_t GateOutcome::count(RuleStatus status) const {
  size_t n = 0;
  for (const auto& o : outcomes) n += o.status == status ? 1 : 0;
  return n;
}

bool GateOutcome::passed(bool strict) const {
  const size_t evaluated =
      count(RuleStatus::Pass) + count(RuleStatus::Fail) + count(RuleStatus::Inconclusive);
  return count(RuleStatus::Fail) == 0 && evaluated > 0 &&
         !(strict && count(RuleStatus::Inconclusive) > 0);
}

void add_to_catalog(GateCatalog& catalog, const RunReport& report) {
  for (const ScenarioResult& s : report.scenarios) {
    std::vector<std::string>& names = catalog[s.name];
    for (const VariantResult& v : s.variants) {
      if (std::find(names.begin(), names.end(), v.name) == names.end()) names.push_back(v.name);
    }
  }
}

void check_gate_names(const GateFile& gate, const GateCatalog& catalog) {
  std::vector<std::string> scenarios;
  for (const auto& [name, _] : catalog) scenarios.push_back(name);
  for (const GateRule& rule : gate.rules) {
    const std::vector<std::string> named = matching(rule.scenario, scenarios);
    if (named.empty()) {
      throw InputError(rule_context(gate, rule) + ": scenario '" + rule.scenario +
                       "' matches no scenario (known: " + list_names(scenarios) + ")");
    }
    std::vector<std::string> variants;
    for (const std::string& s : named) {
      for (const std::string& v : catalog.at(s)) variants.push_back(v);
    }
    if (matching(rule.variant, variants).empty()) {
      throw InputError(rule_context(gate, rule) + ": variant '" + rule.variant +
                       "' matches no variant of " + list_names(named) + " (variants: " +
                       list_names(variants) + ")");
    }
  }
}

GateOutcome evaluate_gate(const GateFile& gate, const RunReport& report,
                          const RunReport* baseline, const GateScope& scope) {
  for (const auto& rule : gate.rules) {
    if (rule.kind == RuleKind::Baseline && baseline == nullptr) {
      throw InputError(rule_context(gate, rule) +
                       ": compares with a baseline report, but no baseline report was given");
    }
  }
  GateOutcome out;
  out.source = gate.source;
  for (const auto& rule : gate.rules) {
    evaluate_rule(gate, rule, report, baseline, scope, out.outcomes);
  }
  return out;
}

}  // namespace harness
