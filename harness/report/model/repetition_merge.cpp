// Merging one command's reports from several processes (see repetition_merge.h).
#include "harness/report/model/repetition_merge.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <stdexcept>

#include "harness/errors.h"
#include "harness/report/text/format.h"

namespace harness {
namespace {

constexpr size_t kMaxCountWarnings = 10;

double median_of_sorted(const std::vector<double>& s) {
  if (s.empty()) return 0;
  const size_t n = s.size();
  return n % 2 == 1 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

// The statistic `stat` ("count", "mean", "median", "min", "max", "stddev") of `values`, or nullopt
// for a name that is not one.
std::optional<double> statistic(const std::string& stat, std::vector<double> values) {
  if (stat == "count") return static_cast<double>(values.size());
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  const double n = static_cast<double>(values.size());
  const double mean = std::accumulate(values.begin(), values.end(), 0.0) / n;
  if (stat == "mean") return mean;
  if (stat == "median") return median_of_sorted(values);
  if (stat == "min") return values.front();
  if (stat == "max") return values.back();
  if (stat == "stddev") {
    double var = 0;
    for (double x : values) var += (x - mean) * (x - mean);
    return values.size() > 1 ? std::sqrt(var / (n - 1)) : 0.0;
  }
  return std::nullopt;
}

// Recomputes each measurement "<prefix><stat>" of `list` from `series`; returns the names done.
void restate(std::vector<Measurement>& list, const std::string& prefix,
             const std::vector<double>& series, std::vector<std::string>& done) {
  for (Measurement& m : list) {
    if (m.name.rfind(prefix, 0) != 0) continue;
    if (auto v = statistic(m.name.substr(prefix.size()), series)) {
      m.value = v;
      done.push_back(m.name);
    }
  }
}

bool is_count(const Measurement& m) {
  return m.unit != "ns" && m.unit != "ratio" && m.unit != "rank" &&
         m.name.rfind("memory.", 0) != 0 && m.name.rfind("host_memory.", 0) != 0;
}

// Per-step counts and launches by op of `other` against `first`: each difference, as a warning.
void note_count_differences(const std::string& where, const VariantResult& first,
                            const VariantResult& other, size_t process,
                            std::vector<std::string>& warnings) {
  auto differs = [&](const std::string& what, const std::string& a, const std::string& b) {
    warnings.push_back("counts differ between processes: " + where + " " + what + ": " + a +
                       " in process 1, " + b + " in process " + std::to_string(process + 1));
  };
  for (const Measurement& m : other.per_step) {
    if (!is_count(m)) continue;
    auto f = std::find_if(first.per_step.begin(), first.per_step.end(),
                          [&](const Measurement& x) { return x.name == m.name; });
    const std::string theirs = m.value ? format_number(*m.value) : "null";
    if (f == first.per_step.end()) {
      differs(m.name, "absent", theirs);
    } else if (f->value != m.value) {
      differs(m.name, f->value ? format_number(*f->value) : "null", theirs);
    }
  }
  std::set<std::string> ops;
  for (const auto& [op, _] : first.launches_by_op) ops.insert(op);
  for (const auto& [op, _] : other.launches_by_op) ops.insert(op);
  for (const std::string& op : ops) {
    auto a = first.launches_by_op.find(op), b = other.launches_by_op.find(op);
    const int64_t na = a == first.launches_by_op.end() ? 0 : a->second;
    const int64_t nb = b == other.launches_by_op.end() ? 0 : b->second;
    if (na != nb) differs("launches_by_op[" + op + "]", std::to_string(na), std::to_string(nb));
  }
}

// Folds process k's result of one variant into `merged` (process 0's, so far merged).
void fold_variant(VariantResult& merged, const VariantResult& next, size_t k,
                  std::map<std::string, std::vector<double>>& shares) {
  if (!merged.ran) return;  // failed in an earlier process: stays so
  if (!next.ran) {
    merged.ran = false;
    merged.expected_failure = next.expected_failure;
    merged.error = "process " + std::to_string(k + 1) + ": " + next.error;
    return;
  }
  for (const auto& [name, values] : next.samples) {
    std::vector<double>& into = merged.samples[name];
    into.insert(into.end(), values.begin(), values.end());
  }
  merged.processes += next.processes;
  for (const Measurement& m : next.timing) {
    if (m.value && m.unit == "ratio") shares[m.name].push_back(*m.value);
  }
}

// The timing statistics of the merged variant, from its merged samples.
void restate_timing(VariantResult& v, const std::map<std::string, std::vector<double>>& shares) {
  std::vector<std::string> done;
  for (const auto& [series, values] : v.samples) {
    restate(v.timing, series + ".", values, done);
    const std::string phase_prefix = "phase[";
    if (series.rfind(phase_prefix, 0) == 0 && series.size() > 6 &&
        series.compare(series.size() - 6, 6, "].time") == 0) {
      const std::string phase = series.substr(phase_prefix.size(),
                                              series.size() - phase_prefix.size() - 6);
      auto p = v.phases.find(phase);
      if (p != v.phases.end()) restate(p->second, "time.", values, done);
    }
  }
  for (Measurement& m : v.timing) {
    auto s = shares.find(m.name);
    if (s == shares.end() || std::find(done.begin(), done.end(), m.name) != done.end()) continue;
    const std::vector<double>& all = s->second;
    m.value = std::accumulate(all.begin(), all.end(), 0.0) / static_cast<double>(all.size());
  }
}

std::string differs(const char* field, const std::string& a, const std::string& b) {
  return a == b ? "" : std::string(field) + " '" + b + "' where the first has '" + a + "'";
}

std::string config_text(const std::map<std::string, std::string>& config) {
  std::string out;
  for (const auto& [k, v] : config) out += (out.empty() ? "" : ", ") + k + "=" + v;
  return out;
}

bool same_samples(const RunReport& a, const RunReport& b) {
  bool any = false;
  for (const ScenarioResult& s : a.scenarios) {
    const ScenarioResult* t = find_scenario(b, s.name);
    for (const VariantResult& v : s.variants) {
      const VariantResult* w = t ? find_variant(*t, v.name) : nullptr;
      if (w == nullptr || v.samples != w->samples) return false;
      any = any || !v.samples.empty();
    }
  }
  return any;
}

}  // namespace

std::string unmergeable(const RunReport& first, const RunReport& other) {
  const Provenance& a = first.provenance;
  const Provenance& b = other.provenance;
  const std::string fields[] = {
      differs("device", a.device, b.device),
      differs("compute", a.compute, b.compute),
      differs("instrument", a.instrument, b.instrument),
      differs("tool_version", a.tool_version, b.tool_version),
      differs("git_sha", a.git_sha, b.git_sha),
      differs("build_type", a.build_type, b.build_type),
      differs("libtorch_version", a.libtorch_version, b.libtorch_version),
      differs("world_size", std::to_string(a.world_size), std::to_string(b.world_size)),
  };
  for (const std::string& d : fields) {
    if (!d.empty()) return d;
  }
  if (first.scenarios.size() != other.scenarios.size()) {
    return "scenarios: " + std::to_string(other.scenarios.size()) + " where the first has " +
           std::to_string(first.scenarios.size());
  }
  for (const ScenarioResult& s : first.scenarios) {
    const ScenarioResult* t = find_scenario(other, s.name);
    if (t == nullptr) return "scenarios: no " + s.name;
    const std::string config = differs(("scenario " + s.name + " config").c_str(),
                                       config_text(s.config), config_text(t->config));
    if (!config.empty()) return config;
    if (s.variants.size() != t->variants.size()) {
      return "scenario " + s.name + ": " + std::to_string(t->variants.size()) +
             " variants where the first has " + std::to_string(s.variants.size());
    }
    for (const VariantResult& v : s.variants) {
      const VariantResult* w = find_variant(*t, v.name);
      if (w == nullptr) return "scenario " + s.name + ": no variant " + v.name;
      if (w->ran && w->samples.empty()) {
        return "scenario " + s.name + " variant " + v.name + ": no samples (nothing to merge)";
      }
    }
  }
  if ((!a.process_id.empty() && a.process_id == b.process_id) || same_samples(first, other)) {
    return "the same process as the first (process_id " +
           (b.process_id.empty() ? std::string("absent, every sample equal") : b.process_id) +
           "): a process counts once";
  }
  return "";
}

RunReport merge_repetitions(const std::vector<RunReport>& per_process) {
  if (per_process.empty()) throw std::invalid_argument("merge_repetitions: no report");
  RunReport out = per_process.front();
  size_t count_warnings = 0;
  for (ScenarioResult& scenario : out.scenarios) {
    for (VariantResult& variant : scenario.variants) {
      std::map<std::string, std::vector<double>> shares;
      for (const Measurement& m : variant.timing) {
        if (m.value && m.unit == "ratio") shares[m.name].push_back(*m.value);
      }
      const VariantResult first = variant;
      for (size_t k = 1; k < per_process.size(); ++k) {
        const ScenarioResult* s = find_scenario(per_process[k], scenario.name);
        const VariantResult* v = s ? find_variant(*s, variant.name) : nullptr;
        if (v == nullptr) {
          throw InputError("process " + std::to_string(k + 1) + " has no result for " +
                           scenario.name + " " + variant.name);
        }
        fold_variant(variant, *v, k, shares);
        if (first.ran && v->ran) {
          std::vector<std::string> found;
          note_count_differences(scenario.name + " " + variant.name, first, *v, k, found);
          for (std::string& w : found) {
            if (count_warnings++ < kMaxCountWarnings) out.warnings.push_back(std::move(w));
          }
        }
      }
      if (variant.ran) restate_timing(variant, shares);
    }
  }
  if (count_warnings > kMaxCountWarnings) {
    out.warnings.push_back("counts differ between processes: " +
                           std::to_string(count_warnings - kMaxCountWarnings) + " more");
  }
  return out;
}

}  // namespace harness
