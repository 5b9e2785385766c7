// Parsing and validating gate files: every problem is an InputError naming the file, the rule and
// what is wrong with it.
#include <cmath>
#include <cstring>
#include <set>

#include "harness/errors.h"
#include "harness/report/gates/gate.h"
#include "harness/report/io/input_file.h"
#include "harness/report/model/pattern.h"

namespace harness {
namespace {

using nlohmann::json;

const std::set<std::string> kTopLevelKeys = {"gate_version", "description", "rules"};
const std::set<std::string> kRuleKeys = {"name",     "scenario", "variant",     "metric",
                                         "max",      "min",      "relative_to", "max_ratio",
                                         "baseline", "equals",   "min_samples", "test",
                                         "alpha",    "min_processes"};
constexpr const char* kMannWhitney = "mann_whitney_u";

std::string join(const std::set<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// The forms of result.h's metric paths, each with a non-empty measurement name.
bool is_metric_path(const std::string& path) {
  for (const char* prefix : {"per_step.", "total.", "timing."}) {
    if (starts_with(path, prefix)) return path.size() > std::strlen(prefix);
  }
  const size_t close = path.rfind("].");
  return starts_with(path, "phase[") && close != std::string::npos && close > 6 &&
         close + 2 < path.size();
}

// Timing measurements are times in ns, except their sample count.
bool is_time_metric(const std::string& path) {
  return starts_with(path, "timing.") && !ends_with(path, ".count");
}

// Reads one rule, throwing InputError prefixed with the file and the rule.
class RuleParser {
 public:
  RuleParser(const json& rule, size_t index, const std::string& source)
      : rule_(rule), source_(source) {
    out_.index = index;
    out_.name = "rules[" + std::to_string(index) + "]";
    if (rule_.is_object() && rule_.contains("name") && rule_["name"].is_string()) {
      context_ = out_.name + " (\"" + rule_["name"].get<std::string>() + "\")";
    } else {
      context_ = out_.name;
    }
  }

  GateRule parse() {
    if (!rule_.is_object()) fail("expected an object, got " + std::string(rule_.type_name()));
    for (const auto& [key, _] : rule_.items()) {
      if (kRuleKeys.count(key) == 0) {
        fail("unknown key '" + key + "' (allowed: " + join(kRuleKeys) + ")");
      }
    }
    if (auto name = string("name")) out_.name = *name;
    out_.scenario = required_string("scenario");
    out_.variant = required_string("variant");
    out_.metric = required_string("metric");
    out_.max = number("max");
    out_.min = number("min");
    out_.relative_to = string("relative_to").value_or("");
    const std::optional<double> max_ratio = number("max_ratio");
    const std::optional<bool> baseline = boolean("baseline");
    const std::optional<bool> equals = boolean("equals");
    out_.min_samples = positive_integer("min_samples");
    if (auto test = string("test")) {
      if (*test != kMannWhitney) {
        fail("unknown 'test' \"" + *test + "\" (known: " + kMannWhitney + ")");
      }
      out_.statistical = true;
    }
    const std::optional<double> alpha = number("alpha");
    out_.min_processes = positive_integer("min_processes");

    if (baseline == false) fail("'baseline' must be true when given");
    std::vector<std::pair<const char*, RuleKind>> kinds;
    if (out_.max || out_.min) kinds.emplace_back(out_.max ? "max" : "min", RuleKind::Absolute);
    if (rule_.contains("relative_to")) kinds.emplace_back("relative_to", RuleKind::Relative);
    if (baseline) kinds.emplace_back("baseline", RuleKind::Baseline);
    if (equals) kinds.emplace_back("equals", RuleKind::Equals);
    if (kinds.empty()) {
      fail(
          "no comparison given: give 'max' and/or 'min', 'relative_to', 'baseline': true, or "
          "'equals'");
    }
    if (kinds.size() > 1) {
      fail(std::string("give one kind of comparison, not both '") + kinds[0].first + "' and '" +
           kinds[1].first + "'");
    }
    out_.kind = kinds[0].second;
    out_.equals = equals.value_or(true);

    check_metric();
    if (out_.statistical) {
      if (out_.kind != RuleKind::Relative && out_.kind != RuleKind::Baseline) {
        fail("'test' compares two series of times: give 'relative_to' or 'baseline': true");
      }
      out_.max_ratio = 1.10;
      if (!out_.min_samples) out_.min_samples = 10;
    }
    if (alpha) {
      if (!out_.statistical) fail("'alpha' applies only to rules with a 'test'");
      if (!(*alpha > 0 && *alpha < 1)) fail("'alpha' must be in (0, 1), got " + rule_["alpha"].dump());
      out_.alpha = *alpha;
    }
    if (out_.min_processes && !(out_.statistical && out_.kind == RuleKind::Baseline)) {
      fail("'min_processes' applies only to a 'test' with 'baseline': true (between two runs)");
    }
    if (max_ratio) {
      if (out_.kind != RuleKind::Relative && out_.kind != RuleKind::Baseline) {
        fail("'max_ratio' applies only to 'relative_to' and 'baseline' rules");
      }
      if (*max_ratio < 0) fail("'max_ratio' must be >= 0, got " + rule_["max_ratio"].dump());
      out_.max_ratio = *max_ratio;
    }
    if (out_.min && out_.max && *out_.min > *out_.max) fail("'min' is greater than 'max'");
    if (out_.kind == RuleKind::Relative) check_relative_to();
    if (out_.kind == RuleKind::Baseline && is_time_metric(out_.metric) && !out_.min_samples &&
        !out_.statistical) {
      fail("compares a time with a baseline: give 'min_samples' (timed steps each run must have)");
    }
    return out_;
  }

 private:
  [[noreturn]] void fail(const std::string& problem) const {
    throw InputError("gate file '" + source_ + "': " + context_ + ": " + problem);
  }

  const json* field(const char* key) const {
    auto it = rule_.find(key);
    return it == rule_.end() ? nullptr : &*it;
  }
  [[noreturn]] void wrong_type(const char* key, const char* expected) const {
    fail(std::string("'") + key + "' must be " + expected + ", got " + field(key)->dump());
  }
  std::optional<std::string> string(const char* key) const {
    const json* f = field(key);
    if (f == nullptr) return std::nullopt;
    if (!f->is_string() || f->get<std::string>().empty()) wrong_type(key, "a non-empty string");
    return f->get<std::string>();
  }
  std::string required_string(const char* key) const {
    auto value = string(key);
    if (!value) fail(std::string("missing '") + key + "'");
    return *value;
  }
  std::optional<double> number(const char* key) const {
    const json* f = field(key);
    if (f == nullptr) return std::nullopt;
    if (!f->is_number()) wrong_type(key, "a number");
    return f->get<double>();
  }
  std::optional<bool> boolean(const char* key) const {
    const json* f = field(key);
    if (f == nullptr) return std::nullopt;
    if (!f->is_boolean()) wrong_type(key, "true or false");
    return f->get<bool>();
  }
  std::optional<int64_t> positive_integer(const char* key) const {
    const json* f = field(key);
    if (f == nullptr) return std::nullopt;
    if (!f->is_number_integer() || f->get<int64_t>() < 1) wrong_type(key, "an integer >= 1");
    return f->get<int64_t>();
  }

  void check_metric() const {
    const bool sites = out_.metric == kNewSyncSites || out_.metric == kNewCopySites;
    if (sites && out_.kind != RuleKind::Baseline) {
      fail("metric '" + out_.metric + "' compares the run's sites with a baseline's: give "
           "'baseline': true");
    }
    if (sites && (rule_.contains("max_ratio") || out_.min_samples)) {
      fail("'max_ratio' and 'min_samples' do not apply to '" + out_.metric +
           "': any new site fails");
    }
    if (sites) return;
    const bool special = out_.metric == kCorrectnessPassed || out_.metric == kStatusOk;
    if (out_.kind == RuleKind::Equals && !special) {
      fail("'equals' applies only to the metrics '" + std::string(kCorrectnessPassed) + "' and '" +
           kStatusOk + "', not '" + out_.metric + "'");
    }
    if (out_.kind != RuleKind::Equals && special) {
      fail("metric '" + out_.metric + "' is true or false: compare it with 'equals'");
    }
    if (out_.kind == RuleKind::Equals && out_.min_samples) {
      fail("'min_samples' does not apply to 'equals' rules");
    }
    const bool series = starts_with(out_.metric, kSamplesPrefix) &&
                        out_.metric.size() > std::strlen(kSamplesPrefix);
    if (out_.statistical && !series) {
      fail("a '" + std::string(kMannWhitney) + "' test needs a sample series: metric samples.<name>" +
           " (e.g. samples.step_time), not '" + out_.metric + "'");
    }
    if (series && !out_.statistical) {
      fail("metric '" + out_.metric + "' is a series of times: compare it with \"test\": \"" +
           kMannWhitney + "\"");
    }
    if (series) return;
    if (!special && !is_metric_path(out_.metric)) {
      fail("metric '" + out_.metric +
           "' is not a metric path: use per_step.<name>, total.<name>, timing.<name>, "
           "phase[<phase>].<name>, samples.<name> (with a test), " +
           kCorrectnessPassed + ", " + kStatusOk + ", " + kNewSyncSites + " or " + kNewCopySites);
    }
  }

  void check_relative_to() const {
    const size_t wildcards = wildcard_count(out_.relative_to);
    if (wildcards != 0 && wildcards != wildcard_count(out_.variant)) {
      fail("'relative_to' \"" + out_.relative_to + "\" has " + std::to_string(wildcards) +
           " '*' but 'variant' \"" + out_.variant + "\" has " +
           std::to_string(wildcard_count(out_.variant)) +
           ": give none (one reference variant) or one per '*' of 'variant'");
    }
  }

  const json& rule_;
  const std::string& source_;
  std::string context_;
  GateRule out_;
};

}  // namespace

GateFile parse_gate_json(const json& j, const std::string& source) {
  auto fail = [&](const std::string& problem) {
    throw InputError("gate file '" + source + "': " + problem);
  };
  if (!j.is_object()) fail("expected a JSON object, got " + std::string(j.type_name()));
  for (const auto& [key, _] : j.items()) {
    if (kTopLevelKeys.count(key) == 0) {
      fail("unknown key '" + key + "' (allowed: " + join(kTopLevelKeys) + ")");
    }
  }
  if (!j.contains("gate_version")) fail("missing 'gate_version' (this harness reads version 1)");
  const json& version = j["gate_version"];
  if (!version.is_number_integer() || version.get<int64_t>() != kGateVersion) {
    fail("unsupported gate_version " + version.dump() + " (this harness reads version " +
         std::to_string(kGateVersion) + ")");
  }
  GateFile out;
  out.source = source;
  if (j.contains("description")) {
    if (!j["description"].is_string()) fail("'description' must be a string");
    out.description = j["description"].get<std::string>();
  }
  if (!j.contains("rules")) fail("missing 'rules'");
  const json& rules = j["rules"];
  if (!rules.is_array()) fail("'rules' must be an array, got " + std::string(rules.type_name()));
  if (rules.empty()) fail("'rules' is empty: a gate without rules checks nothing");
  for (size_t i = 0; i < rules.size(); ++i) {
    out.rules.push_back(RuleParser(rules[i], i, source).parse());
  }
  return out;
}

GateFile parse_gate_text(const std::string& text, const std::string& source) {
  json j;
  try {
    j = parse_json_without_duplicate_keys<json>(text);
  } catch (const json::exception& e) {  // parse errors, and numbers out of range (1e400)
    throw InputError("gate file '" + source + "' is not valid JSON: " + e.what());
  } catch (const DuplicateKey& e) {
    throw InputError("gate file '" + source + "': " + e.what() + " in one object");
  }
  return parse_gate_json(j, source);
}

GateFile parse_gate_file(const std::string& path) {
  return parse_gate_text(read_input_file(path, "gate file"), path);
}

}  // namespace harness
