#include "harness/report/io/gbench_json.h"

#include "harness/report/compare/statistics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace harness {
namespace {

// A finite number, or 0 (the format has no null; a missing time is reported as an error).
double finite(const std::optional<double>& v) { return v && std::isfinite(*v) ? *v : 0.0; }

std::optional<double> timing(const VariantResult& v, const std::string& name) {
  const Measurement* m = find_metric(v, "timing." + name);
  return m ? m->value : std::nullopt;
}

ReportJson entry(const std::string& name, size_t family, const std::string& run_type) {
  return {{"name", name},
          {"family_index", family},
          {"per_family_instance_index", 0},
          {"run_name", name},
          {"run_type", run_type}};
}

void add_counters(ReportJson& e, const VariantResult& v) {
  for (const Measurement& m : v.per_step) {
    if (m.value && std::isfinite(*m.value)) e[m.name] = *m.value;
  }
}

struct Stats {
  double mean = 0, median = 0, stddev = 0;
};

Stats stats_of(const std::vector<double>& x) {
  Stats s;
  if (x.empty()) return s;
  const double n = static_cast<double>(x.size());
  s.mean = std::accumulate(x.begin(), x.end(), 0.0) / n;
  s.median = median_of(x);
  double var = 0;
  for (double v : x) var += (v - s.mean) * (v - s.mean);
  s.stddev = x.size() > 1 ? std::sqrt(var / (n - 1)) : 0.0;
  return s;
}

void add_variant(ReportJson& out, const std::string& name, size_t family, const VariantResult& v,
                 bool repetitions) {
  if (!v.ran) {
    ReportJson e = entry(name, family, "iteration");
    e.update({{"repetitions", 1}, {"repetition_index", 0}, {"threads", 1},
              {"error_occurred", true},
              {"error_message", v.failed_as_expected() ? "expected failure: " + v.error : v.error},
              {"iterations", 0}, {"real_time", 0}, {"cpu_time", 0}, {"time_unit", "ns"}});
    out.push_back(std::move(e));
    return;
  }
  const std::vector<double>* wall = find_samples(v, "samples.step_time");
  const std::vector<double>* cpu = find_samples(v, "samples.step_cpu_time");
  if (!repetitions || wall == nullptr || wall->empty()) {
    ReportJson e = entry(name, family, "iteration");
    const double steps = finite(timing(v, "step_time.count"));
    e.update({{"repetitions", 1}, {"repetition_index", 0}, {"threads", 1},
              {"iterations", static_cast<long long>(steps)},
              {"real_time", finite(timing(v, "step_time.mean"))},
              {"cpu_time", finite(timing(v, "step_cpu_time.mean"))},
              {"time_unit", "ns"}});
    add_counters(e, v);
    out.push_back(std::move(e));
    return;
  }
  const size_t n = wall->size();
  std::vector<double> cpu_times(n, 0.0);
  if (cpu != nullptr && cpu->size() == n) cpu_times = *cpu;
  for (size_t i = 0; i < n; ++i) {
    ReportJson e = entry(name, family, "iteration");
    e.update({{"repetitions", n}, {"repetition_index", i}, {"threads", 1}, {"iterations", 1},
              {"real_time", (*wall)[i]}, {"cpu_time", cpu_times[i]}, {"time_unit", "ns"}});
    add_counters(e, v);
    out.push_back(std::move(e));
  }
  const Stats w = stats_of(*wall), c = stats_of(cpu_times);
  const std::pair<const char*, std::pair<double, double>> aggregates[] = {
      {"mean", {w.mean, c.mean}}, {"median", {w.median, c.median}}, {"stddev", {w.stddev, c.stddev}}};
  for (const auto& [aggregate, times] : aggregates) {
    ReportJson e = entry(name + "_" + aggregate, family, "aggregate");
    e["run_name"] = name;
    e.update({{"repetitions", n}, {"threads", 1}, {"aggregate_name", aggregate},
              {"aggregate_unit", "time"}, {"iterations", n}, {"real_time", times.first},
              {"cpu_time", times.second}, {"time_unit", "ns"}});
    out.push_back(std::move(e));
  }
}

}  // namespace

ReportJson gbench_json(const RunReport& report, const GbenchContext& c, bool repetitions) {
  ReportJson caches = ReportJson::array();
  for (const GbenchCache& k : c.caches) {
    caches.push_back(
        {{"type", k.type}, {"level", k.level}, {"size", k.size}, {"num_sharing", k.num_sharing}});
  }
  const Provenance& p = report.provenance;
  ReportJson out = {
      {"context",
       {{"date", c.date},
        {"host_name", c.host_name},
        {"executable", c.executable},
        {"num_cpus", c.num_cpus},
        {"mhz_per_cpu", static_cast<long long>(std::llround(c.mhz_per_cpu))},
        {"cpu_scaling_enabled", c.cpu_scaling_enabled},
        {"caches", caches},
        {"load_avg", c.load_avg},
        {"library_build_type", c.library_build_type},
        {"json_schema_version", 1},
        // What Google Benchmark does not have, for humans; its tools ignore unknown keys.
        {"harness_version", p.tool_version},
        {"harness_git_sha", p.git_sha},
        {"harness_device", p.device_name.empty() ? p.device : p.device_name},
        {"harness_instrument", p.instrument},
        {"harness_libtorch_version", p.libtorch_version}}}};
  ReportJson& benchmarks = out["benchmarks"] = ReportJson::array();
  size_t family = 0;
  for (const ScenarioResult& s : report.scenarios) {
    for (const VariantResult& v : s.variants) {
      add_variant(benchmarks, s.name + "/" + v.name, family++, v, repetitions);
    }
  }
  return out;
}

}  // namespace harness
