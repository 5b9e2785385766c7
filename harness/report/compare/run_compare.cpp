// Pairing two reports metric by metric and deciding what changed (see run_compare.h).
#include "harness/report/compare/run_compare.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "harness/report/text/format.h"
#include "harness/report/model/pattern.h"

namespace harness {
namespace {

// Time series compared only when asked for (--phase-times): each phase's time, and each step's
// time waited in syncs (microseconds on sim, where timer noise dominates).
bool diagnostic_series(const std::string& name) {
  return starts_with(name, "phase[") || name == "sync.wait_time" || name == kMachineProbe;
}

// Counts are exact; this only absorbs floating-point rounding of per-step divisions.
constexpr double kCountTolerance = 1e-9;


// Ran as it should: ran, or failed as it is expected to.
bool ok(const VariantResult& v) { return v.ran || v.failed_as_expected(); }

// What a scenario's figures can carry, from how it ran on each side.
struct Trust {
  bool host_memory = true;  // host memory levels get a verdict
  std::string times;        // why its times cannot get one ("" when they can)
};

class VariantComparer {
 public:
  VariantComparer(const std::string& scenario, const VariantResult& base,
                  const VariantResult& head, const TimeTestOptions& options, bool phase_times,
                  const Trust& trust, std::vector<ComparedMetric>& rows)
      : scenario_(scenario),
        base_(base),
        head_(head),
        options_(options),
        phase_times_(phase_times),
        trust_(trust),
        rows_(rows) {}

  // Returns false when the measured windows differ (phase counts were then not compared).
  bool run() {
    ComparedMetric status = row("status.ok", "bool", ok(base_), ok(head_));
    status.change = flag_change(ok(base_), ok(head_));
    if (!ok(head_)) status.note = "head failed: " + head_.error;
    if (!ok(base_)) status.note = "base failed: " + base_.error;
    rows_.push_back(status);
    if (!base_.ran || !head_.ran) return true;
    if (base_.correctness.checked && head_.correctness.checked) {
      ComparedMetric c = row("correctness.passed", "bool", base_.correctness.passed,
                             head_.correctness.passed);
      c.change = flag_change(base_.correctness.passed, head_.correctness.passed);
      if (!head_.correctness.passed) c.note = head_.correctness.detail;
      rows_.push_back(c);
    }
    compare_counts("per_step.", base_.per_step, head_.per_step, /*memory_only=*/false);
    compare_counts("total.", base_.total, head_.total, /*memory_only=*/true);
    compare_launches_by_op();
    const bool same_window = base_.measured_steps == head_.measured_steps;
    if (same_window) compare_phase_counts();
    compare_times();
    return same_window;
  }

 private:
  ComparedMetric row(const std::string& metric, const std::string& unit,
                     std::optional<double> base, std::optional<double> head) const {
    ComparedMetric m;
    m.scenario = scenario_;
    m.variant = head_.name;
    m.metric = metric;
    m.unit = unit;
    m.base = base;
    m.head = head;
    return m;
  }

  static Change flag_change(bool base, bool head) {
    if (base == head) return Change::Unchanged;
    return head ? Change::Improvement : Change::Regression;
  }

  // Higher is worse for every count, byte figure and memory level.
  void add_count(ComparedMetric m) {
    if (!m.base && !m.head) return;
    if (!m.base || !m.head) {
      m.change = Change::Inconclusive;
      m.note = std::string("not measured in ") + (m.base ? "head" : "base") + " (null)";
    } else {
      const double slack = kCountTolerance * std::max(1.0, std::fabs(*m.base));
      m.change = *m.head > *m.base + slack   ? Change::Regression
                 : *m.head < *m.base - slack ? Change::Improvement
                                             : Change::Unchanged;
      if (m.change != Change::Unchanged && !trust_.host_memory &&
          m.metric.find("host_memory.") != std::string::npos) {
        m.change = Change::Info;
        m.note = "host memory level of a scenario on ranks: varies from run to run (Gloo's and "
                 "autograd's threads); --host-memory gives it a verdict";
      }
    }
    rows_.push_back(std::move(m));
  }

  void add_presence(const std::string& metric, const std::string& unit,
                    std::optional<double> base, std::optional<double> head) {
    ComparedMetric m = row(metric, unit, base, head);
    m.change = base ? Change::Missing : Change::New;
    rows_.push_back(std::move(m));
  }

  // Measurements of the same list by name, in head's order, then those only base has.
  void compare_counts(const std::string& prefix, const std::vector<Measurement>& base,
                      const std::vector<Measurement>& head, bool memory_only) {
    auto wanted = [&](const Measurement& m) {
      if (m.unit == "ns" || m.unit == "ratio" || m.unit == "rank") return false;
      return !memory_only || starts_with(m.name, "memory.") || starts_with(m.name, "host_memory.");
    };
    std::set<std::string> seen;
    for (const Measurement& h : head) {
      if (!wanted(h)) continue;
      seen.insert(h.name);
      auto b = std::find_if(base.begin(), base.end(),
                            [&](const Measurement& m) { return m.name == h.name; });
      if (b == base.end()) {
        add_presence(prefix + h.name, h.unit, std::nullopt, h.value);
        continue;
      }
      add_count(row(prefix + h.name, h.unit, b->value, h.value));
    }
    for (const Measurement& b : base) {
      if (wanted(b) && !seen.count(b.name)) add_presence(prefix + b.name, b.unit, b.value, std::nullopt);
    }
  }

  void compare_phase_counts() {
    std::set<std::string> phases;
    for (const auto& [p, _] : base_.phases) phases.insert(p);
    for (const auto& [p, _] : head_.phases) phases.insert(p);
    static const std::vector<Measurement> kNone;
    for (const std::string& p : phases) {
      auto b = base_.phases.find(p);
      auto h = head_.phases.find(p);
      std::vector<Measurement> counts_b, counts_h;
      for (const Measurement& m : b == base_.phases.end() ? kNone : b->second) {
        if (m.unit != "ns") counts_b.push_back(m);
      }
      for (const Measurement& m : h == head_.phases.end() ? kNone : h->second) {
        if (m.unit != "ns") counts_h.push_back(m);
      }
      compare_counts("phase[" + p + "].", counts_b, counts_h, /*memory_only=*/false);
    }
  }

  // Launches of each op per measured step.
  void compare_launches_by_op() {
    std::set<std::string> ops;
    for (const auto& [op, _] : base_.launches_by_op) ops.insert(op);
    for (const auto& [op, _] : head_.launches_by_op) ops.insert(op);
    auto per_step = [](const VariantResult& v, const std::string& op) -> std::optional<double> {
      auto it = v.launches_by_op.find(op);
      if (it == v.launches_by_op.end()) return std::nullopt;
      return v.measured_steps > 0 ? static_cast<double>(it->second) / v.measured_steps
                                  : static_cast<double>(it->second);
    };
    for (const std::string& op : ops) {
      const std::string metric = "launches_by_op[" + op + "]";
      std::optional<double> b = per_step(base_, op), h = per_step(head_, op);
      // An op absent on one side launched nothing there: 0, a change like any other.
      add_count(row(metric, "count/step", b.value_or(0), h.value_or(0)));
    }
  }

  void compare_times() {
    std::set<std::string> names;
    for (const auto* v : {&base_, &head_}) {
      for (const auto& [name, _] : v->samples) {
        if (phase_times_ || !diagnostic_series(name)) names.insert(name);
      }
    }
    if (names.empty()) {  // reports before schema 1.2: medians only, nothing to test
      const Measurement* b = find_metric(base_, "timing.step_time.median");
      const Measurement* h = find_metric(head_, "timing.step_time.median");
      if (b && h) {
        ComparedMetric m = row("timing.step_time.median", "ns", b->value, h->value);
        m.change = Change::Inconclusive;
        m.note = "no per-step samples (reports before schema 1.2): medians are not tested";
        rows_.push_back(std::move(m));
      }
      return;
    }
    for (const std::string& name : names) {
      const std::string metric = kSamplesPrefix + name;
      const std::vector<double>* b = find_samples(base_, metric);
      const std::vector<double>* h = find_samples(head_, metric);
      auto median = [](const std::vector<double>* s) -> std::optional<double> {
        if (s == nullptr || s->empty()) return std::nullopt;
        return median_of(*s);
      };
      if (b == nullptr || h == nullptr) {
        add_presence(metric, "ns", median(b), median(h));
        continue;
      }
      ComparedMetric m = row(metric, "ns", median(b), median(h));
      auto all_zero = [](const std::vector<double>* s) {
        return std::all_of(s->begin(), s->end(), [](double x) { return x == 0; });
      };
      if (!b->empty() && !h->empty() && all_zero(b) && all_zero(h)) {
        m.change = Change::Unchanged;  // no time on either side (a variant without syncs)
        m.note = "0 in every step on both sides";
        rows_.push_back(std::move(m));
        continue;
      }
      m.time = harness::compare_times(
          *h, *b, options_,
          ProcessCounts{static_cast<size_t>(head_.processes), static_cast<size_t>(base_.processes)});
      switch (m.time->verdict) {
        case TimeVerdict::Regression: m.change = Change::Regression; break;
        case TimeVerdict::Improvement: m.change = Change::Improvement; break;
        case TimeVerdict::Unchanged: m.change = Change::Unchanged; break;
        case TimeVerdict::Inconclusive: m.change = Change::Inconclusive; break;
      }
      m.note = m.time->reason;
      if ((m.change == Change::Regression || m.change == Change::Improvement) &&
          m.time->ratio.ratio) {
        // A machine slower (or faster) for the whole of one run moves the probe too.
        const std::string drift =
            machine_drift(*m.time->ratio.ratio, machine_probe_samples(head_),
                          machine_probe_samples(base_), options_);
        if (!drift.empty()) {
          m.change = Change::Inconclusive;
          m.note = drift + "; " + m.note;
        }
      }
      const std::string crowded_base = contention(base_), crowded_head = contention(head_);
      if (!trust_.times.empty()) {
        m.change = Change::Inconclusive;
        m.note = trust_.times;
      } else if ((m.change == Change::Regression || m.change == Change::Improvement) &&
                 (!crowded_base.empty() || !crowded_head.empty())) {
        // A change measured while other work held the cores is the load as likely as the code.
        // (No change found under that noise stays unchanged: the test only had less power.)
        m.note = (crowded_base.empty() ? "head: " + crowded_head : "base: " + crowded_base) +
                 "; " + m.note;
        m.change = Change::Inconclusive;
      }
      rows_.push_back(std::move(m));
    }
  }

  const std::string& scenario_;
  const VariantResult& base_;
  const VariantResult& head_;
  const TimeTestOptions& options_;
  const bool phase_times_;
  const Trust& trust_;
  std::vector<ComparedMetric>& rows_;
};

void add_difference(std::vector<EnvironmentDifference>& out, const char* field,
                    const std::string& base, const std::string& head) {
  if (base != head) out.push_back({field, base, head});
}

std::vector<EnvironmentDifference> environment_differences(const Provenance& b,
                                                           const Provenance& h) {
  std::vector<EnvironmentDifference> out;
  add_difference(out, "device", b.device, h.device);
  add_difference(out, "device name", b.device_name, h.device_name);
  add_difference(out, "instrument", b.instrument, h.instrument);
  add_difference(out, "instrument status", b.instrument_status, h.instrument_status);
  add_difference(out, "build type", b.build_type, h.build_type);
  add_difference(out, "host", b.hostname, h.hostname);
  add_difference(out, "LibTorch", b.libtorch_version, h.libtorch_version);
  add_difference(out, "CUDA", b.cuda_version, h.cuda_version);
  add_difference(out, "harness version", b.tool_version, h.tool_version);
  add_difference(out, "ranks", std::to_string(b.world_size), std::to_string(h.world_size));
  return out;
}

// A machine that is slower (or faster) for a whole run shifts every step of it, which the U test
// sees as significant (docs/ci.md: run-to-run drift). So a time verdict stands only where the variant
// moved beyond max_ratio against its scenario's median move too: rows [begin, end) of one
// scenario, per series, where at least kShiftVariants variants have a ratio. A verdict that only
// follows the scenario's move becomes inconclusive: drift, or a change that moved every variant,
// which two runs cannot tell apart.
constexpr size_t kShiftVariants = 3;

void discount_scenario_shift(std::vector<ComparedMetric>& rows, size_t begin,
                             const TimeTestOptions& options) {
  std::map<std::string, std::vector<double>> ratios;  // series -> every variant's ratio
  for (size_t i = begin; i < rows.size(); ++i) {
    const ComparedMetric& m = rows[i];
    if (m.time && m.time->ratio.ratio && m.change != Change::Inconclusive) {
      ratios[m.metric].push_back(*m.time->ratio.ratio);
    }
  }
  for (size_t i = begin; i < rows.size(); ++i) {
    ComparedMetric& m = rows[i];
    if (!m.time || !m.time->ratio.ratio) continue;
    if (m.change != Change::Regression && m.change != Change::Improvement) continue;
    const std::vector<double>& all = ratios[m.metric];
    if (all.size() < kShiftVariants) continue;
    const double shift = median_of(all);
    const double relative = *m.time->ratio.ratio / shift;
    if (relative > options.max_ratio || relative < 1 / options.max_ratio) continue;
    m.note = "moved with its scenario: ratio " + format_ratio(*m.time->ratio.ratio) +
             ", the median of its " + std::to_string(all.size()) + " variants " +
             format_ratio(shift) + " (" + format_ratio(relative) + "x that, within " +
             format_ratio(options.max_ratio) + "x): drift of the machine, or a change that " +
             "moved every variant; " + m.time->reason;
    m.change = Change::Inconclusive;
  }
}

std::string config_differences(const ScenarioResult& b, const ScenarioResult& h) {
  std::string out;
  std::set<std::string> keys;
  for (const auto& [k, _] : b.config) keys.insert(k);
  for (const auto& [k, _] : h.config) keys.insert(k);
  for (const std::string& k : keys) {
    auto vb = b.config.find(k);
    auto vh = h.config.find(k);
    const std::string sb = vb == b.config.end() ? "(none)" : vb->second;
    const std::string sh = vh == h.config.end() ? "(none)" : vh->second;
    if (sb != sh) out += (out.empty() ? "" : ", ") + k + " " + sb + " -> " + sh;
  }
  return out;
}

}  // namespace

const char* to_string(Change change) {
  switch (change) {
    case Change::Regression: return "regression";
    case Change::Improvement: return "improvement";
    case Change::Unchanged: return "unchanged";
    case Change::Inconclusive: return "inconclusive";
    case Change::New: return "new";
    case Change::Missing: return "missing";
    case Change::Info: return "informational";
  }
  return "?";
}

size_t RunComparison::count(Change change) const {
  return static_cast<size_t>(std::count_if(
      rows.begin(), rows.end(), [&](const ComparedMetric& m) { return m.change == change; }));
}

bool RunComparison::failed(bool strict) const {
  if (count(Change::Regression) > 0) return true;
  if (strict && count(Change::Inconclusive) > 0) return true;
  for (const GateOutcome& g : gates) {
    if (!g.passed(strict)) return true;
  }
  return false;
}

std::string RunComparison::tally() const {
  auto n = [&](Change c, const char* one, const char* many) {
    const size_t k = count(c);
    return std::to_string(k) + " " + (k == 1 ? one : many);
  };
  return n(Change::Regression, "regression", "regressions") + ", " +
         n(Change::Improvement, "improvement", "improvements") + ", " +
         n(Change::Unchanged, "unchanged", "unchanged") + ", " +
         n(Change::Inconclusive, "inconclusive", "inconclusive") + ", " +
         n(Change::New, "new", "new") + ", " + n(Change::Missing, "missing", "missing") + ", " +
         n(Change::Info, "informational", "informational");
}

RunComparison compare_reports(const RunReport& base, const RunReport& head,
                              const TimeTestOptions& time_options, bool phase_times,
                              bool host_memory) {
  RunComparison out;
  out.base = base.provenance;
  out.head = head.provenance;
  out.time_options = time_options;
  out.environment = environment_differences(base.provenance, head.provenance);
  auto whole_variant = [&](const std::string& scenario, const VariantResult& v, bool in_head) {
    ComparedMetric m;
    m.scenario = scenario;
    m.variant = v.name;
    m.metric = "(variant)";
    m.change = in_head ? Change::New : Change::Missing;
    m.note = in_head ? "only in head" : "only in base";
    out.rows.push_back(std::move(m));
  };
  for (const ScenarioResult& h : head.scenarios) {
    const ScenarioResult* b = find_scenario(base, h.name);
    if (b == nullptr) {
      for (const VariantResult& v : h.variants) whole_variant(h.name, v, true);
      continue;
    }
    const std::string config = config_differences(*b, h);
    if (!config.empty()) out.notes.push_back(h.name + " ran with another configuration: " + config);
    if (b->world_size != h.world_size) {
      out.notes.push_back(h.name + " ran on " + std::to_string(b->world_size) + " rank(s) in base, " +
                          std::to_string(h.world_size) + " in head: counts sum over ranks");
    }
    Trust trust;
    trust.host_memory = host_memory || (b->world_size == 1 && h.world_size == 1);
    const std::string crowded_base = oversubscription(base.provenance, b->world_size);
    const std::string crowded_head = oversubscription(head.provenance, h.world_size);
    if (!crowded_base.empty() || !crowded_head.empty()) {
      trust.times = crowded_base.empty() ? "head: " + crowded_head : "base: " + crowded_base;
      out.notes.push_back(h.name + ": " + trust.times + ": its times are inconclusive");
    }
    size_t other_window = 0;
    const size_t first_row = out.rows.size();
    for (const VariantResult& v : h.variants) {
      const VariantResult* bv = find_variant(*b, v.name);
      if (bv == nullptr) {
        whole_variant(h.name, v, true);
        continue;
      }
      if (!VariantComparer(h.name, *bv, v, time_options, phase_times, trust, out.rows).run()) {
        ++other_window;
      }
    }
    discount_scenario_shift(out.rows, first_row, time_options);
    if (other_window > 0) {
      out.notes.push_back(h.name + ": " + std::to_string(other_window) +
                          " variant(s) measured another number of steps: their phase counts "
                          "(window totals) are not compared; per-step counts and times are");
    }
    for (const VariantResult& v : b->variants) {
      if (find_variant(h, v.name) == nullptr) whole_variant(h.name, v, false);
    }
  }
  for (const ScenarioResult& b : base.scenarios) {
    if (find_scenario(head, b.name) != nullptr) continue;
    for (const VariantResult& v : b.variants) whole_variant(b.name, v, false);
  }
  out.sites = diff_sites(base, head);
  return out;
}

}  // namespace harness
